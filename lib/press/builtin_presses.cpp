#include "press/press_registry.h"

namespace kvc {

// One line per method file under lib/press/: its registration (register_method with a builder).
void register_streaming_llm();
void register_h2o();
void register_tova();
void register_roco();
void register_snapkv();
void register_pyramidkv();
void register_knorm();
void register_random();
void register_dynamickv();
void register_d2o();
void register_kvcompose();
void register_ada();
void register_keydiff();
void register_expected_attention();
void register_lagkv();
void register_leverage();
void register_non_causal_attention();
void register_cur();
void register_compactor();
void register_criticalkv();
void register_cap();
void register_qfilter();
void register_chunk();
void register_block();
void register_kvzip();
void register_key_rerotation();
void register_think();
void register_simlayerkv();
void register_duo_attention();
void register_chunkkv();
void register_dms();
void register_lukv();
void register_finch();
void register_merging();
void register_decoding();

void register_builtin_presses() {
  register_streaming_llm();
  register_h2o();
  register_tova();
  register_roco();
  register_snapkv();
  register_pyramidkv();
  register_knorm();
  register_random();
  register_dynamickv();
  register_d2o();
  register_kvcompose();
  register_ada();
  register_keydiff();
  register_expected_attention();
  register_lagkv();
  register_leverage();
  register_non_causal_attention();
  register_cur();
  register_compactor();
  register_criticalkv();
  register_cap();
  register_qfilter();
  register_chunk();
  register_block();
  register_kvzip();
  register_key_rerotation();
  register_think();
  register_simlayerkv();
  register_duo_attention();
  register_chunkkv();
  register_dms();
  register_lukv();
  register_finch();
  register_merging();
  register_decoding();
}

}  // namespace kvc
