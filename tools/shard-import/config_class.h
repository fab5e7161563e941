// The Hugging Face configuration classes shard-import reads, as data: for
// each class the defaults transformers applies to keys a config.json leaves
// out (published configs rely on them: Gemma 3's sparse text_config), and
// the keys it reads that do not change the compiled step. Each table says
// where its values come from.
#ifndef SHARD_IMPORT_CONFIG_CLASS_H
#define SHARD_IMPORT_CONFIG_CLASS_H

/// One default: a key and its value as JSON text ("262208", "true",
/// "\"gelu_pytorch_tanh\"").
typedef struct import_default {
  const char *key;
  const char *value;
} import_default;

typedef struct import_config_class {
  const char *name;   // "Gemma3TextConfig"
  const char *source; // where the defaults were read
  const import_default *defaults;  // {NULL, NULL}-terminated
  const char *const *inert;        // NULL-terminated: keys read by transformers
                                   // that the compiled training step does not
                                   // depend on (no warning when present)
} import_config_class;

/// The class named `name`, or NULL.
const import_config_class *import_config_class_by_name(const char *name);

/// The default of `key` in `cls` (JSON text), or NULL when it has none.
const char *import_config_class_default(const import_config_class *cls, const char *key);

/// Whether `key` is inert for `cls`: in its list, or one of the keys every
/// PretrainedConfig has that never changes training (architectures,
/// model_type, transformers_version, dtype, token ids, use_cache, ...).
int import_config_class_inert(const import_config_class *cls, const char *key);

#endif // SHARD_IMPORT_CONFIG_CLASS_H
