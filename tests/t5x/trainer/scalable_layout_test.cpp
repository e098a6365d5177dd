// t5x's scalable_t5 checkpoint layout (checkpoints/param_layout.h): a tiny
// scalable_t5 model trained with scan_layers = True writes t5x's stacked
// leaves (shapes from network.py's nn.scan at param_scan_axis and
// adafactor.py's init_param_state under standard_logical_factor_rules), each
// layer's values where transformers' convert_umt5_checkpoint_to_pytorch.py
// reads them ([:, i]); a kill and resume through that layout is bitwise
// equal; unscanned, the attention kernels are [embed, heads, kv].
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/param_layout.h"
#include "t5x/optim/adafactor.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x::trainer {
namespace {

using testing::temp_dir;
using testing::tiny_bindings;
using testing::tiny_config;

TrainerOptions fast() {
  TrainerOptions o;
  o.durable_checkpoints = false;
  return o;
}

Distributed single() { return Distributed::create(PartitionerConfig{}, make_single_communicator()); }

TrainRunConfig scalable_run(const std::string& dir, int steps, std::vector<std::string> extra = {}) {
  auto b = tiny_bindings(dir, steps);
  b.insert(b.end(), extra.begin(), extra.end());
  return read_train_config(tiny_config(b, "configs/runs/pretrain.gin", testing::scalable_model_file()));
}

std::vector<float> floats(const HostTensor& t) { return cast_host_tensor(t, "float32").values<float>(); }

TEST(ScalableLayout, ScannedCheckpointHoldsT5xStackedLeaves) {
  const std::string dir = temp_dir("scalable_scan");
  Trainer t(scalable_run(dir, 2, {"adafactor.Adafactor.beta1 = 0.9"}), single(), fast());
  ASSERT_EQ(t.train().status, TrainResult::Status::kDone);
  const CheckpointReader r = CheckpointReader::open(dir + "/checkpoint_2");
  // Parameters: network.py's scan inserts 'layers' at param_scan_axis = 1.
  const std::map<std::string, std::vector<int64_t>> params = {
      {"encoder/encoder/attention/query/kernel", {32, 2, 4, 8}},
      {"encoder/encoder/attention/out/kernel", {4, 2, 8, 32}},
      {"encoder/encoder/mlp/wi_0/kernel", {32, 2, 64}},
      {"encoder/encoder/mlp/wo/kernel", {64, 2, 32}},
      {"encoder/encoder/pre_attention_layer_norm/scale", {32, 2}},
      {"encoder/encoder/relpos_bias/rel_embedding", {4, 2, 32}},
      {"decoder/decoder/encoder_decoder_attention/value/kernel", {32, 2, 4, 8}},
      {"decoder/decoder/pre_cross_attention_layer_norm/scale", {32, 2}},
      {"encoder/encoder_norm/scale", {32}},
      {"decoder/logits_dense/kernel", {32, 1152}},
  };
  for (const auto& [p, shape] : params) {
    ASSERT_TRUE(r.has("target/" + p)) << p;
    EXPECT_EQ(r.info("target/" + p).shape, shape) << p;
  }
  for (const auto& p : r.array_paths()) EXPECT_EQ(p.find("layers_"), std::string::npos) << p;
  // model-info.txt lists the parameters as the checkpoint holds them, with
  // their logical axes (as t5x's lists scalable_t5's stacked ones).
  std::ifstream info_file(dir + "/model-info.txt");
  const std::string info{std::istreambuf_iterator<char>(info_file), {}};
  EXPECT_NE(info.find("shape (embed=32, layers=2, heads=4, kv=8)"), std::string::npos) << info;
  EXPECT_NE(info.find("Variable encoder/encoder/attention/out/kernel"), std::string::npos) << info;
  EXPECT_EQ(info.find("layers_"), std::string::npos) << info;
  // Adafactor's slots as t5x's init_param_state makes them for the stacked
  // parameters: v_row drops the COLUMN dims, v_col the ROW ones, 'layers'
  // (BATCH) stays in both; the rest are (1,) placeholders.
  const std::map<std::string, std::vector<int64_t>> slots = {
      {"encoder/encoder/attention/query/kernel/v_row", {32, 2}},
      {"encoder/encoder/attention/query/kernel/v_col", {2, 4, 8}},
      {"encoder/encoder/attention/query/kernel/v", {1}},
      {"encoder/encoder/attention/out/kernel/v_row", {2, 32}},
      {"encoder/encoder/attention/out/kernel/v_col", {4, 2, 8}},
      {"encoder/encoder/mlp/wi_0/kernel/v_row", {32, 2}},
      {"encoder/encoder/mlp/wi_0/kernel/v_col", {2, 64}},
      {"encoder/encoder/mlp/wo/kernel/v_row", {2, 32}},
      {"encoder/encoder/mlp/wo/kernel/v_col", {64, 2}},
      {"encoder/encoder/pre_attention_layer_norm/scale/v", {32, 2}},
      {"encoder/encoder/pre_attention_layer_norm/scale/v_row", {1}},
      {"encoder/encoder/relpos_bias/rel_embedding/v", {4, 2, 32}},
      {"decoder/logits_dense/kernel/v", {32, 1152}},  // a matrix under 128: not factored (the heuristic)
  };
  for (const auto& [p, shape] : slots) {
    ASSERT_TRUE(r.has("state/param_states/" + p)) << p;
    EXPECT_EQ(r.info("state/param_states/" + p).shape, shape) << p;
  }
  // Each layer's values where transformers' converter reads them:
  // query[:, i, :, :] reshaped to [embed, heads * kv], out[:, i, :, :] to
  // [heads * kv, embed], scale[:, i].
  const auto query = floats(r.read("target/decoder/decoder/self_attention/query/kernel"));
  const auto out = floats(r.read("target/decoder/decoder/self_attention/out/kernel"));
  const auto scale = floats(r.read("target/encoder/encoder/pre_mlp_layer_norm/scale"));
  const auto vcol = floats(r.read("state/param_states/encoder/encoder/attention/query/kernel/v_col"));
  for (int64_t i = 0; i < 2; ++i) {
    const std::string l = "layers_" + std::to_string(i);
    const auto q = t.state().params.at("decoder/" + l + "/self_attention/query/kernel").to_floats();
    const auto o = t.state().params.at("decoder/" + l + "/self_attention/out/kernel").to_floats();
    const auto s = t.state().params.at("encoder/" + l + "/pre_mlp_layer_norm/scale").to_floats();
    const auto c = t.state().opt.slots.at("encoder/" + l + "/attention/query/kernel/v_col").to_floats();
    ASSERT_EQ(q.size(), 32u * 32u);
    for (int64_t e = 0; e < 32; ++e)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t d = 0; d < 8; ++d) {
          ASSERT_EQ(query[size_t(((e * 2 + i) * 4 + h) * 8 + d)], q[size_t(e * 32 + h * 8 + d)]);
          ASSERT_EQ(out[size_t(((h * 2 + i) * 8 + d) * 32 + e)], o[size_t((h * 8 + d) * 32 + e)]);
        }
    for (int64_t e = 0; e < 32; ++e) ASSERT_EQ(scale[size_t(e * 2 + i)], s[size_t(e)]);
    ASSERT_EQ(c.size(), 32u);
    for (int64_t j = 0; j < 32; ++j) ASSERT_EQ(vcol[size_t(i * 32 + j)], c[size_t(j)]);
    EXPECT_GT(c[0], 0.0f);  // trained: the statistics are not the zeros of init
  }
  // Read back into the model's per-layer leaves.
  TrainState s = t.state();
  for (auto& [k, v] : s.params) v = Array::zeros(v.shape(), v.dtype());
  for (auto& [k, v] : s.opt.slots) v = Array::zeros(v.shape(), v.dtype());
  const RestoreResult rr = restore_train_state(dir + "/checkpoint_2", s, true, "", 0, 1,
                                               checkpoint_layout(t.model(), t.config().optimizer.optimizer.get()));
  EXPECT_TRUE(rr.optimizer_restored);
  EXPECT_TRUE(rr.unused_params.empty());
  EXPECT_TRUE(rr.unused_slots.empty());
  for (const auto& [k, v] : t.state().params) EXPECT_TRUE(array_equal(v, s.params.at(k))) << k;
  for (const auto& [k, v] : t.state().opt.slots) EXPECT_TRUE(array_equal(v, s.opt.slots.at(k))) << k;
}

// Trains `steps` steps, optionally stopping after `stop` and resuming.
TrainState run(const std::string& dir, int steps, int stop, std::vector<double>* losses,
               const std::vector<std::string>& extra = {}) {
  if (stop > 0) {
    TrainerOptions o = fast();
    o.stop_after_step = stop;
    Trainer first(scalable_run(dir, steps, extra), single(), o);
    EXPECT_EQ(first.train().status, TrainResult::Status::kStopped);
  }
  Trainer t(scalable_run(dir, steps, extra), single(), fast());
  TrainResult r = t.train();
  EXPECT_EQ(r.status, TrainResult::Status::kDone) << r.message;
  *losses = r.losses;
  return t.state();
}

TEST(ScalableLayout, KillAndResumeThroughTheStackedLayoutIsBitwiseEqual) {
  for (const char* scan : {"True", "False"}) {
    const std::vector<std::string> extra = {std::string("network.T5Config.scan_layers = ") + scan,
                                            "adafactor.Adafactor.beta1 = 0.9"};
    std::vector<double> la, lb;
    const TrainState a = run(temp_dir("scalable_whole"), 4, 0, &la, extra);
    const TrainState b = run(temp_dir("scalable_resumed"), 4, 3, &lb, extra);  // resumes at checkpoint 2
    for (const auto& [k, v] : a.params) EXPECT_TRUE(array_equal(v, b.params.at(k))) << scan << " " << k;
    for (const auto& [k, v] : a.opt.slots) EXPECT_TRUE(array_equal(v, b.opt.slots.at(k))) << scan << " " << k;
    ASSERT_EQ(lb.size(), 2u);
    EXPECT_EQ(la[2], lb[0]);
    EXPECT_EQ(la[3], lb[1]);
  }
}

// Unscanned: one parameter per layer, attention kernels with separate heads
// and kv dims (layers.py's DenseGeneral(features=(num_heads, head_dim))),
// factored by their rule (v_col [heads, kv]); the MLP's matrices are
// t5x's plain ones (under 128: not factored).
TEST(ScalableLayout, UnscannedCheckpointSplitsTheAttentionHeads) {
  const std::string dir = temp_dir("scalable_noscan");
  Trainer t(scalable_run(dir, 2, {"network.T5Config.scan_layers = False"}), single(), fast());
  ASSERT_EQ(t.train().status, TrainResult::Status::kDone);
  const CheckpointReader r = CheckpointReader::open(dir + "/checkpoint_2");
  EXPECT_EQ(r.info("target/encoder/layers_1/attention/key/kernel").shape, (std::vector<int64_t>{32, 4, 8}));
  EXPECT_EQ(r.info("target/decoder/layers_0/encoder_decoder_attention/out/kernel").shape,
            (std::vector<int64_t>{4, 8, 32}));
  EXPECT_EQ(r.info("state/param_states/encoder/layers_1/attention/key/kernel/v_col").shape,
            (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(r.info("state/param_states/decoder/layers_0/encoder_decoder_attention/out/kernel/v_row").shape,
            (std::vector<int64_t>{32}));
  EXPECT_EQ(r.info("target/encoder/layers_1/mlp/wi_1/kernel").shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(r.info("state/param_states/encoder/layers_1/mlp/wi_1/kernel/v").shape, (std::vector<int64_t>{32, 64}));
  // t5x infer reads it back into the model's per-layer kernels.
  TrainState s = t.state();
  for (auto& [k, v] : s.params) v = Array::zeros(v.shape(), v.dtype());
  restore_train_state(dir + "/checkpoint_2", s, true, "", 0, 1, checkpoint_layout(t.model(), t.config().optimizer.optimizer.get()));
  for (const auto& [k, v] : t.state().params) EXPECT_TRUE(array_equal(v, s.params.at(k))) << k;
  for (const auto& [k, v] : t.state().opt.slots) EXPECT_TRUE(array_equal(v, s.opt.slots.at(k))) << k;
}

// Without logical_factor_rules t5x cannot hold a stacked parameter's state
// (rank above 2 needs a rule); neither does t5x.cpp, and it says which binding does.
TEST(ScalableLayout, StackedLayoutWithoutFactorRulesIsRefusedWithTheBinding) {
  try {
    Trainer t(scalable_run(temp_dir("scalable_norules"), 2, {"adafactor.Adafactor.logical_factor_rules = None"}),
              single(), fast());
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("as `encoder/encoder/"), std::string::npos) << m;  // a stacked parameter, named
    EXPECT_NE(m.find("logical_factor_rules = @adafactor.standard_logical_factor_rules()"), std::string::npos) << m;
  }
}

// A checkpoint in another of these layouts than the model's config reads is
// refused with the binding that reads it, and the run leaves MODEL_DIR's
// config.gin (which describes its checkpoints) as it was.
TEST(ScalableLayout, AnotherLayoutIsRefusedWithTheBindingThatReadsIt) {
  const std::string scanned = temp_dir("scalable_scanned_ckpt"), unscanned = temp_dir("scalable_unscanned_ckpt");
  ASSERT_EQ(Trainer(scalable_run(scanned, 2), single(), fast()).train().status, TrainResult::Status::kDone);
  ASSERT_EQ(Trainer(scalable_run(unscanned, 2, {"network.T5Config.scan_layers = False"}), single(), fast())
                .train()
                .status,
            TrainResult::Status::kDone);
  auto resume_error = [](const std::string& dir, const TrainRunConfig& c) -> std::string {
    try {
      Trainer t(c, single(), fast());
      t.train();
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "<no error>";
  };
  auto read = [](const std::string& f) {
    std::ifstream in(f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string config = read(scanned + "/config.gin");
  std::string m = resume_error(scanned, scalable_run(scanned, 4, {"network.T5Config.scan_layers = False"}));
  EXPECT_NE(m.find("the checkpoint stacks each layer parameter over the layers (`target/decoder/decoder/"),
            std::string::npos) << m;
  EXPECT_NE(m.find("bind network.T5Config.scan_layers = True"), std::string::npos) << m;
  EXPECT_EQ(read(scanned + "/config.gin"), config);
  m = resume_error(scanned, scalable_run(scanned, 4, {"network.T5Config.param_scan_axis = 0"}));
  EXPECT_NE(m.find("bind network.T5Config.param_scan_axis = 1"), std::string::npos) << m;
  m = resume_error(unscanned, scalable_run(unscanned, 4));
  EXPECT_NE(m.find("the checkpoint holds one parameter per layer"), std::string::npos) << m;
  EXPECT_NE(m.find("bind network.T5Config.scan_layers = False"), std::string::npos) << m;
  EXPECT_EQ(m.find("num_kv_heads"), std::string::npos) << m;  // not grouped-query attention
  // T5's network reading either: scalable_t5's network is named.
  auto t5 = [](const std::string& dir) {
    auto b = tiny_bindings(dir, 4);
    b.push_back("network.T5Config.num_heads = 4");
    return read_train_config(tiny_config(b));
  };
  m = resume_error(scanned, t5(scanned));
  EXPECT_NE(m.find("configure the model with t5x's scalable_t5 network"), std::string::npos) << m;
  m = resume_error(unscanned, t5(unscanned));
  EXPECT_NE(m.find("the checkpoint's attention kernels split the heads"), std::string::npos) << m;
  EXPECT_EQ(m.find("num_kv_heads"), std::string::npos) << m;
}

}  // namespace
}  // namespace t5x::trainer
