# Reads two memory reports (FSDP, then replicated over dp, at one dp) and
# prints the FSDP / replicated ratio (to 3 places: small tensors are padded to 64 bytes) of parameters, gradients and moments;
# fails unless the FSDP persistent bytes are at most a quarter of the
# replicated ones plus the most gathered parameter bytes.
/"(params|grads|moments|persistent_bytes|gathered_params_max_bytes)"/ {
  key = $1
  gsub(/[ "]/, "", key)
  v[FILENAME, key] = $2 + 0
}
END {
  f = ARGV[1]
  r = ARGV[2]
  if (!(v[f, "persistent_bytes"] <= v[r, "persistent_bytes"] / 4 + v[f, "gathered_params_max_bytes"])) {
    print "FSDP persistent", v[f, "persistent_bytes"], "exceeds a quarter of", v[r, "persistent_bytes"]
    exit 1
  }
  printf "fsdp / replicated: params %.3f grads %.3f moments %.3f, persistent within a quarter plus the gathered\n",
         v[f, "params"] / v[r, "params"], v[f, "grads"] / v[r, "grads"], v[f, "moments"] / v[r, "moments"]
}
