import sys
p = sys.argv[1]
s = open(p).read()
a1 = "    if (!graph_reuse_disable && gf_res_prev_active == res && res->can_reuse(gparams)) {\n"
w1 = "    bool planted_reused = false;\n" + a1 + "        planted_reused = true;\n"
a2 = "        // FIXME this call causes a crash if any model inputs were not used in the graph and were therefore not allocated\n        res->set_inputs(&ubatch);\n"
w2 = a2 + """        if (planted_reused && ubatch.pos && ubatch.pos[0] >= (llama_pos) cparams.n_ctx) {
            for (auto & inp : res->inputs) {
                auto * kv = dynamic_cast<llm_graph_input_attn_kv *>(inp.get());
                if (kv && kv->self_k_idxs && kv->self_k_idxs->buffer) {
                    int64_t * idx = (int64_t *) kv->self_k_idxs->data;
                    idx[0] = (idx[0] + 1) % (int64_t) cparams.n_ctx;
                }
            }
        }
"""
assert s.count(a1) == 1 and s.count(a2) == 1
open(p, "w").write(s.replace(a1, w1).replace(a2, w2))
