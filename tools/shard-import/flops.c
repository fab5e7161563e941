// The model FLOPs per token (flops.h): from the parsed config and the
// parameters the graph was built with, so that no one re-reads config.json.
#include "flops.h"

double import_flops_per_token(const import_config *cfg, const import_model *model, int64_t seq) {
  double params = 0, embedding = 0;
  for (int i = 0; i < model->num_params; ++i) {
    double n = (double)import_param_numel(&model->params[i]);
    params += n;
    if (model->params[i].kind == IMPORT_PARAM_EMBEDDING)
      embedding += n;
  }
  int64_t attention = import_config_count_blocks(cfg, IMPORT_BLOCK_FULL) +
                      import_config_count_blocks(cfg, IMPORT_BLOCK_SLIDING) +
                      import_config_count_blocks(cfg, IMPORT_BLOCK_ATTENTION);
  int64_t mamba = import_config_count_blocks(cfg, IMPORT_BLOCK_MAMBA);
  // A lookup is no matmul; a tied lm_head is, through the same weight.
  double matmul = params - (cfg->tie ? 0 : embedding);
  return 6 * matmul +
         12.0 * (double)attention * (double)cfg->heads * (double)cfg->head_dim * (double)seq +
         21.0 * (double)mamba * (double)(cfg->mamba_heads * cfg->mamba_head_dim) *
             (double)cfg->ssm_state;
}
