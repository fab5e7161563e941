# cpu-offload.test: ARGV[1] the --cpu-offload report, ARGV[2] the same
# plan's without. Checks that each side adds up and that the temporaries
# are unchanged; prints the device persistent part's ratio and the host-only prefix
# (host params + moments: the program table's offload_bytes).
/"(persistent_bytes|grads|compute_copies|inputs|temporaries_peak_bytes|total_bytes|pinned_bytes|params|moments|staging)"/ {
  key = $1
  gsub(/[ "]/, "", key)
  # "params" and "moments" appear twice with offload: device (0), then host.
  if (FILENAME == ARGV[1] && (key == "params" || key == "moments") && key in off)
    key = "host_" key
  if (FILENAME == ARGV[1])
    off[key] = $2 + 0
  else
    on[key] = $2 + 0
}
END {
  if (off["persistent_bytes"] != off["grads"] + off["compute_copies"] + off["inputs"] ||
      off["params"] != 0 || off["moments"] != 0) {
    print "device persistent does not add up"
    exit 1
  }
  if (off["pinned_bytes"] != off["host_params"] + off["host_moments"] + off["staging"] ||
      off["staging"] != off["persistent_bytes"] || off["host_params"] != on["params"] ||
      off["host_moments"] != on["moments"] ||
      off["pinned_bytes"] != on["persistent_bytes"]) {
    print "host side does not add up"
    exit 1
  }
  if (off["temporaries_peak_bytes"] != on["temporaries_peak_bytes"]) {
    print "temporaries changed"
    exit 1
  }
  printf "device persistent = grads + copies + inputs; host = params + moments + staging; temporaries unchanged; device persistent %.3f of without\n", off["persistent_bytes"] / on["persistent_bytes"]
  printf "host-only %d\n", off["host_params"] + off["host_moments"]
}
