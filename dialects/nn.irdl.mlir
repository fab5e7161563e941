// The `nn` dialect: model graphs at Hugging Face *module* granularity, so that
// each op maps to one fused kernel and one sharding rule. Loaded at run time
// through mlirLoadIRDLDialects; embedded in every tool at build time.
//
// Conventions (checked further by the `nn-verify` pass, which says what IRDL
// cannot: shapes, element types, value ranges):
// - activations are tensor<B x S x F>; attention activations keep heads
//   folded in the last dim ([B, S, heads * head_dim]) so a head split is a
//   last-dim split;
// - linear weights are [out_features, in_features] as in torch.nn.Linear;
// - every op carries `nn.module = "<Hugging Face module path>"`;
// - IRDL has no optional attributes, so "absent" is spelled with a sentinel
//   documented per attribute (0 = none).
// Each `irdl.any`/`irdl.base` is one constraint *variable*: operands or
// attributes sharing one must be equal, which is how "output has the input's
// type" is said; independent attributes each get their own variable.
irdl.dialect @nn {
  // Token embedding: output[b, s, :] = weight[ids[b, s], :] * scale.
  // ids: tensor<BxSxi64>, weight: [vocab, hidden], output: [B, S, hidden].
  // scale: 1.0, or sqrt(hidden) for Gemma (rounded to the weight dtype).
  // padding_idx: the row whose lookups give it no gradient (torch
  // nn.Embedding's padding_idx, the config's pad_token_id), or -1: none.
  irdl.operation @embedding {
    %ids = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %scale = irdl.base "#builtin.float"
    %pad = irdl.base "#builtin.integer"
    irdl.operands(input_ids: %ids, weight: %w)
    irdl.results(output: %out)
    irdl.attributes {"scale" = %scale, "padding_idx" = %pad}
  }

  // y = x W^T (+ b). x: [..., in], weight: [out, in], bias: [out], y: [..., out].
  irdl.operation @linear {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %b = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(input: %x, weight: %w, bias: optional %b)
    irdl.results(output: %y)
  }

  // RMSNorm in fp32: y = (offset + w) * x / sqrt(mean(x^2) + eps), the mean
  // taken over groups of `head_dim` elements of the last dim (q_norm/k_norm on
  // [B, S, heads * head_dim]) or over the whole last dim when head_dim = 0.
  // offset: 0.0, or 1.0 for Gemma's (1 + w). weight: [head_dim or last dim].
  irdl.operation @rms_norm {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %eps = irdl.base "#builtin.float"
    %zero = irdl.is 0.0 : f64
    %one = irdl.is 1.0 : f64
    %offset = irdl.any_of(%zero, %one)
    %group = irdl.base "#builtin.integer"
    irdl.operands(input: %x, weight: %w)
    irdl.results(output: %x)
    irdl.attributes {"eps" = %eps, "offset" = %offset, "head_dim" = %group}
  }

  // The rotary tuple: (cos, sin), each [B, S, head_dim], computed once per
  // model from positions (position_ids [B, S], or 0..S-1 when absent) and
  // handed to every attention layer. rope_type "llama3" also needs the
  // attributes factor, low_freq_factor, high_freq_factor and
  // original_max_position_embeddings, "linear" (positions / factor) the
  // attribute factor (checked by nn-verify).
  irdl.operation @rotary_embedding {
    %pos = irdl.base "!builtin.tensor"
    %cs = irdl.base "!builtin.tensor"
    %hd = irdl.base "#builtin.integer"
    %theta = irdl.base "#builtin.float"
    %default = irdl.is "default"
    %llama3 = irdl.is "llama3"
    %linear = irdl.is "linear"
    %type = irdl.any_of(%default, %llama3, %linear)
    irdl.operands(position_ids: optional %pos)
    irdl.results(cos: %cs, sin: %cs)
    irdl.attributes {"head_dim" = %hd, "theta" = %theta, "rope_type" = %type}
  }

  // Applies RoPE (rotate-half convention, as in Hugging Face) to every head of
  // x: [B, S, heads * head_dim] with cos/sin [B, S, head_dim].
  irdl.operation @apply_rotary {
    %x = irdl.base "!builtin.tensor"
    %cs = irdl.base "!builtin.tensor"
    %hd = irdl.base "#builtin.integer"
    irdl.operands(input: %x, cos: %cs, sin: %cs)
    irdl.results(output: %x)
    irdl.attributes {"head_dim" = %hd}
  }

  // Scaled dot-product attention with grouped KV heads.
  // query: [B, S, num_heads * head_dim], key/value: [B, S, num_kv_heads * head_dim],
  // output: [B, S, num_heads * head_dim], lse: [B, num_heads, S] f32, each
  // query's log-sum-exp of its scores (nats), which the backward reads
  // instead of running the forward again. sliding_window = 0: none;
  // softcap = 0.0: none (else scores = softcap * tanh(scores / softcap)).
  // segment_ids (optional, int [B, S]): each token's document within its
  // row; a query sees only the keys of its own document (a run of equal
  // ids), and a token of id -1 (padding) neither sees nor is seen.
  irdl.operation @attention {
    %q = irdl.base "!builtin.tensor"
    %kv = irdl.base "!builtin.tensor"
    %heads = irdl.base "#builtin.integer"
    %kv_heads = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %causal = irdl.any_of(%true, %false)
    %scale = irdl.base "#builtin.float"
    %window = irdl.base "#builtin.integer"
    %softcap = irdl.base "#builtin.float"
    %lse = irdl.base "!builtin.tensor"
    %seg = irdl.base "!builtin.tensor"
    irdl.operands(query: %q, key: %kv, value: %kv, segment_ids: optional %seg)
    irdl.results(output: %q, lse: %lse)
    irdl.attributes {"num_heads" = %heads, "num_kv_heads" = %kv_heads,
                     "head_dim" = %head_dim, "causal" = %causal,
                     "scale" = %scale, "sliding_window" = %window,
                     "softcap" = %softcap}
  }

  // Gated MLP activation: act(gate) * up, act = silu or gelu (tanh form).
  irdl.operation @glu {
    %x = irdl.base "!builtin.tensor"
    %silu = irdl.is "silu"
    %gelu = irdl.is "gelu_tanh"
    %act = irdl.any_of(%silu, %gelu)
    irdl.operands(gate: %x, up: %x)
    irdl.results(output: %x)
    irdl.attributes {"activation" = %act}
  }

  // Squared ReLU (NemotronH MLP): relu(x)^2.
  irdl.operation @relu2 {
    %x = irdl.base "!builtin.tensor"
    irdl.operands(input: %x)
    irdl.results(output: %x)
  }

  // Elementwise sum of two tensors of one type (residual connections).
  irdl.operation @add {
    %x = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %x, rhs: %x)
    irdl.results(output: %x)
  }

  // NemotronH's Mamba2 mixer (selective state-space layer) as one op:
  // in_proj -> split (gate z, conv input xBC, dt) -> causal depthwise conv1d
  // + silu on xBC -> split (x, B, C) -> SSD scan with A = -exp(A_log),
  // dt = softplus(dt + dt_bias) and skip D -> gated RMSNorm
  // (norm(y * silu(z)) per group of intermediate / n_groups) -> out_proj.
  // With H = hidden, I = num_heads * head_dim, G = n_groups, N = state_size,
  // K = conv_kernel and C = I + 2 * G * N (the conv channels):
  // input [B, S, H], in_proj_weight [I + C + num_heads, H],
  // conv1d_weight [C, 1, K], conv1d_bias [C], dt_bias / a_log / d
  // [num_heads], norm_weight [I], out_proj_weight [H, I], output [B, S, H].
  // chunk_size is the SSD scan's chunk length; eps the gated norm's epsilon.
  // segment_ids (optional, i64 [B, S]): packed documents; the conv and the
  // scan restart where the id changes (mamba_ssm's seq_idx).
  irdl.operation @mamba2_mixer {
    %x = irdl.base "!builtin.tensor"
    %seg = irdl.base "!builtin.tensor"
    %in_w = irdl.base "!builtin.tensor"
    %conv_w = irdl.base "!builtin.tensor"
    %conv_b = irdl.base "!builtin.tensor"
    %dt_bias = irdl.base "!builtin.tensor"
    %a_log = irdl.base "!builtin.tensor"
    %d = irdl.base "!builtin.tensor"
    %norm_w = irdl.base "!builtin.tensor"
    %out_w = irdl.base "!builtin.tensor"
    %heads = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    %groups = irdl.base "#builtin.integer"
    %state = irdl.base "#builtin.integer"
    %kernel = irdl.base "#builtin.integer"
    %chunk = irdl.base "#builtin.integer"
    %eps = irdl.base "#builtin.float"
    %dt_min = irdl.base "#builtin.float"
    irdl.operands(input: %x, in_proj_weight: %in_w, conv1d_weight: %conv_w,
                  conv1d_bias: %conv_b, dt_bias: %dt_bias, a_log: %a_log,
                  d: %d, norm_weight: %norm_w, out_proj_weight: %out_w,
                  segment_ids: optional %seg)
    irdl.results(output: %x)
    irdl.attributes {"num_heads" = %heads, "head_dim" = %head_dim,
                     "n_groups" = %groups, "state_size" = %state,
                     "conv_kernel" = %kernel, "chunk_size" = %chunk,
                     "eps" = %eps, "dt_min" = %dt_min}
  }

  // Causal-LM loss: mean cross-entropy over labels != ignore_index.
  // logits: [B, S, vocab], labels: tensor<BxSxi64>, loss: tensor<f32>.
  // shift = true: logits at 0..S-2 are scored against labels at 1..S-1.
  irdl.operation @cross_entropy {
    %logits = irdl.base "!builtin.tensor"
    %labels = irdl.base "!builtin.tensor"
    %loss = irdl.base "!builtin.tensor"
    %int = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %bool = irdl.any_of(%true, %false)
    irdl.operands(logits: %logits, labels: %labels)
    irdl.results(loss: %loss)
    irdl.attributes {"ignore_index" = %int, "shift" = %bool}
  }

  //===--------------------------------------------------------------------===//
  // Ops that tp-partition introduces in per-rank graphs.
  //===--------------------------------------------------------------------===//

  // x + bias broadcast over the last dim: a rowwise linear's bias, added once
  // after the reduction. x: [..., F], bias: [F].
  irdl.operation @bias_add {
    %x = irdl.base "!builtin.tensor"
    %b = irdl.base "!builtin.tensor"
    irdl.operands(input: %x, bias: %b)
    irdl.results(output: %x)
  }

  // The value of a non-blocking collective (its operand's defining op, which
  // overlap-collectives starts early) once the collective has completed:
  // the same tensor, in the same buffer. Placed before its first reader.
  irdl.operation @wait {
    %x = irdl.base "!builtin.tensor"
    irdl.operands(input: %x)
    irdl.results(output: %x)
  }

  // Vocabulary-parallel cross-entropy, in four steps around three tp
  // all-reduces (max, sum of exponentials, target logit) so the logits are
  // never gathered. Each rank holds logits [B, S, V/tp]; its vocabulary range
  // starts at tp_index * V/tp when `nn.vocab_parallel_axis` names the axis.
  // 1. max over the local vocabulary: logits [B, S, V] -> [B, S] f32.
  irdl.operation @ce_logit_max {
    %logits = irdl.base "!builtin.tensor"
    %max = irdl.base "!builtin.tensor"
    irdl.operands(logits: %logits)
    irdl.results(max: %max)
  }

  // 2. With the global max: the local sum of exp(logit - max) and the local
  // target logit (0 where the label is outside the local range), each
  // [B, S] f32, for the (shifted) label of each position.
  irdl.operation @ce_partial_sums {
    %logits = irdl.base "!builtin.tensor"
    %labels = irdl.base "!builtin.tensor"
    %stat = irdl.base "!builtin.tensor"
    %int = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %bool = irdl.any_of(%true, %false)
    irdl.operands(logits: %logits, labels: %labels, max: %stat)
    irdl.results(sum_exp: %stat, target: %stat)
    irdl.attributes {"ignore_index" = %int, "shift" = %bool}
  }

  // 3. From the global max, sum of exponentials and target logit: the sum of
  // the per-position losses and the number of kept labels, tensor<2xf32>
  // (a Partial sum over dp when the batch is split).
  irdl.operation @ce_loss_sum {
    %stat = irdl.base "!builtin.tensor"
    %labels = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %int = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %bool = irdl.any_of(%true, %false)
    irdl.operands(max: %stat, sum_exp: %stat, target: %stat, labels: %labels)
    irdl.results(sum_and_count: %out)
    irdl.attributes {"ignore_index" = %int, "shift" = %bool}
  }

  // 4. The mean loss: sum / count (0 when no label is kept), tensor<f32>.
  irdl.operation @ce_mean {
    %in = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(sum_and_count: %in)
    irdl.results(loss: %out)
  }

  //===--------------------------------------------------------------------===//
  // Backward ops, appended by nn-autodiff to the global graph. Each takes
  // the forward op's operands it needs and the gradient `dy` of the forward
  // result (d loss = 1), and produces the gradient of one forward operand.
  // Sharding rules for them live with the forward ones (sharding_rules.c).
  //===--------------------------------------------------------------------===//

  // d weight [V, D] of nn.embedding: rows scatter-added from dy [B, S, D] by
  // ids [B, S] (times scale), tokens equal to padding_idx left out; `weight`
  // gives the shape and placement.
  irdl.operation @embedding_grad {
    %ids = irdl.base "!builtin.tensor"
    %dy = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %scale = irdl.base "#builtin.float"
    %pad = irdl.base "#builtin.integer"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(input_ids: %ids, dy: %dy, weight: %w)
    irdl.results(dweight: %dw)
    irdl.attributes {"scale" = %scale, "padding_idx" = %pad}
  }

  // dx [..., in] = dy [..., out] W [out, in].
  irdl.operation @linear_grad_input {
    %dy = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, weight: %w)
    irdl.results(dx: %dx)
  }

  // dW [out, in] = sum over rows of dy [..., out]^T x [..., in]; `weight`
  // gives the placement (a weight's gradient lives like it) and is never
  // read: after partitioning it may be a parameter's FSDP shard, dW the
  // whole (tp-local) gradient.
  irdl.operation @linear_grad_weight {
    %dy = irdl.base "!builtin.tensor"
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, input: %x, weight: %w)
    irdl.results(dweight: %dw)
  }

  // db [out] = sum over rows of dy [..., out].
  irdl.operation @linear_grad_bias {
    %dy = irdl.base "!builtin.tensor"
    %db = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy)
    irdl.results(dbias: %db)
  }

  // dx of nn.rms_norm (same attributes as the forward op).
  irdl.operation @rms_norm_grad_input {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %eps = irdl.base "#builtin.float"
    %zero = irdl.is 0.0 : f64
    %one = irdl.is 1.0 : f64
    %offset = irdl.any_of(%zero, %one)
    %group = irdl.base "#builtin.integer"
    irdl.operands(input: %x, weight: %w, dy: %x)
    irdl.results(dx: %x)
    irdl.attributes {"eps" = %eps, "offset" = %offset, "head_dim" = %group}
  }

  // dw [head_dim or F] of nn.rms_norm: sum over rows (and heads) of
  // dy * x / rms(x); the result has the weight's type.
  irdl.operation @rms_norm_grad_weight {
    %x = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    %eps = irdl.base "#builtin.float"
    %group = irdl.base "#builtin.integer"
    irdl.operands(input: %x, dy: %x)
    irdl.results(dweight: %dw)
    irdl.attributes {"eps" = %eps, "head_dim" = %group}
  }

  // dx of nn.apply_rotary: the inverse rotation of dy.
  irdl.operation @apply_rotary_grad {
    %x = irdl.base "!builtin.tensor"
    %cs = irdl.base "!builtin.tensor"
    %hd = irdl.base "#builtin.integer"
    irdl.operands(dy: %x, cos: %cs, sin: %cs)
    irdl.results(dx: %x)
    irdl.attributes {"head_dim" = %hd}
  }

  // (dq, dk, dv) of nn.attention from its query, key, value, output, lse
  // and dy, the output's gradient, and the forward's segment_ids when it has
  // them (same attributes as the forward op).
  irdl.operation @attention_grad {
    %q = irdl.base "!builtin.tensor"
    %kv = irdl.base "!builtin.tensor"
    %heads = irdl.base "#builtin.integer"
    %kv_heads = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %causal = irdl.any_of(%true, %false)
    %scale = irdl.base "#builtin.float"
    %window = irdl.base "#builtin.integer"
    %softcap = irdl.base "#builtin.float"
    %lse = irdl.base "!builtin.tensor"
    %seg = irdl.base "!builtin.tensor"
    irdl.operands(query: %q, key: %kv, value: %kv, output: %q, lse: %lse, dy: %q,
                  segment_ids: optional %seg)
    irdl.results(dquery: %q, dkey: %kv, dvalue: %kv)
    irdl.attributes {"num_heads" = %heads, "num_kv_heads" = %kv_heads,
                     "head_dim" = %head_dim, "causal" = %causal,
                     "scale" = %scale, "sliding_window" = %window,
                     "softcap" = %softcap}
  }

  // (dx, d in_proj, d conv1d weight, d conv1d bias, d dt_bias, d A_log, d D,
  // d norm weight, d out_proj) of nn.mamba2_mixer (same attributes, its
  // operands, then dy).
  irdl.operation @mamba2_mixer_grad {
    %x = irdl.base "!builtin.tensor"
    %seg = irdl.base "!builtin.tensor"
    %in_w = irdl.base "!builtin.tensor"
    %conv_w = irdl.base "!builtin.tensor"
    %conv_b = irdl.base "!builtin.tensor"
    %dt_bias = irdl.base "!builtin.tensor"
    %a_log = irdl.base "!builtin.tensor"
    %d = irdl.base "!builtin.tensor"
    %norm_w = irdl.base "!builtin.tensor"
    %out_w = irdl.base "!builtin.tensor"
    %heads = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    %groups = irdl.base "#builtin.integer"
    %state = irdl.base "#builtin.integer"
    %kernel = irdl.base "#builtin.integer"
    %chunk = irdl.base "#builtin.integer"
    %eps = irdl.base "#builtin.float"
    %dt_min = irdl.base "#builtin.float"
    irdl.operands(input: %x, in_proj_weight: %in_w, conv1d_weight: %conv_w,
                  conv1d_bias: %conv_b, dt_bias: %dt_bias, a_log: %a_log, d: %d,
                  norm_weight: %norm_w, out_proj_weight: %out_w,
                  segment_ids: optional %seg, dy: %x)
    irdl.results(dinput: %x, din_proj_weight: %in_w, dconv1d_weight: %conv_w,
                 dconv1d_bias: %conv_b, ddt_bias: %dt_bias, da_log: %a_log, dd: %d,
                 dnorm_weight: %norm_w, dout_proj_weight: %out_w)
    irdl.attributes {"num_heads" = %heads, "head_dim" = %head_dim,
                     "n_groups" = %groups, "state_size" = %state,
                     "conv_kernel" = %kernel, "chunk_size" = %chunk,
                     "eps" = %eps, "dt_min" = %dt_min}
  }

  // (dgate, dup) of nn.glu.
  irdl.operation @glu_grad {
    %x = irdl.base "!builtin.tensor"
    %silu = irdl.is "silu"
    %gelu = irdl.is "gelu_tanh"
    %act = irdl.any_of(%silu, %gelu)
    irdl.operands(gate: %x, up: %x, dy: %x)
    irdl.results(dgate: %x, dup: %x)
    irdl.attributes {"activation" = %act}
  }

  // dx of nn.relu2.
  irdl.operation @relu2_grad {
    %x = irdl.base "!builtin.tensor"
    irdl.operands(input: %x, dy: %x)
    irdl.results(dx: %x)
  }

  // d loss / d logits of nn.cross_entropy (the loss is the differentiated
  // output: its gradient is 1).
  irdl.operation @cross_entropy_grad {
    %logits = irdl.base "!builtin.tensor"
    %labels = irdl.base "!builtin.tensor"
    %int = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %bool = irdl.any_of(%true, %false)
    irdl.operands(logits: %logits, labels: %labels)
    irdl.results(dlogits: %logits)
    irdl.attributes {"ignore_index" = %int, "shift" = %bool}
  }

  // Introduced by tp-partition: d loss / d logits of the split loss from its
  // global statistics (max and sum of exponentials [B, S], and the (loss
  // sum, count) pair whose count the mean divides by).
  irdl.operation @ce_logits_grad {
    %logits = irdl.base "!builtin.tensor"
    %labels = irdl.base "!builtin.tensor"
    %stat = irdl.base "!builtin.tensor"
    %pair = irdl.base "!builtin.tensor"
    %int = irdl.base "#builtin.integer"
    %true = irdl.is true
    %false = irdl.is false
    %bool = irdl.any_of(%true, %false)
    irdl.operands(logits: %logits, labels: %labels, max: %stat, sum_exp: %stat,
                  sum_and_count: %pair)
    irdl.results(dlogits: %logits)
    irdl.attributes {"ignore_index" = %int, "shift" = %bool}
  }

  //===--------------------------------------------------------------------===//
  // The optimizer step, appended by nn-optimizer.
  //===--------------------------------------------------------------------===//

  // Gives gradient `grad` to the parameter named by `nn.grad_of` for the
  // optimizer step that ends the function (a variadic IRDL operand would
  // force every gradient to one type, so each is handed over by its own op).
  irdl.operation @store_grad {
    %grad = irdl.base "!builtin.tensor"
    irdl.operands(grad: %grad)
    irdl.results()
  }

  // Ends a training step: the total gradient norm of the gradients stored by
  // nn.store_grad (each logical element counted once), clipping by total
  // norm (max_grad_norm <= 0: none), AdamW; a non-finite norm skips the
  // update. norm_type: 1, 2, any p > 0, or inf. The loss is reported.
  irdl.operation @optimizer_step {
    %loss = irdl.base "!builtin.tensor"
    %max_norm = irdl.base "#builtin.float"
    %norm_type = irdl.base "#builtin.float"
    %lr = irdl.base "#builtin.float"
    %beta1 = irdl.base "#builtin.float"
    %beta2 = irdl.base "#builtin.float"
    %eps = irdl.base "#builtin.float"
    %wd = irdl.base "#builtin.float"
    irdl.operands(loss: %loss)
    irdl.results()
    irdl.attributes {"max_grad_norm" = %max_norm, "norm_type" = %norm_type,
                     "lr" = %lr, "beta1" = %beta1, "beta2" = %beta2,
                     "eps" = %eps, "weight_decay" = %wd}
  }
}
