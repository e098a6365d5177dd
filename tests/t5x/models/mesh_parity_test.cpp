// Issue 5 acceptance: the forward and backward pass of every model
// (EncoderDecoderModel with T5.1.1 and T5.1.0 configs, DecoderOnlyModel as a
// causal LM and as a prefix LM) on meshes (data, model) = (2,1), (1,2), (2,2)
// equals the single-device run: loss, logits and every gradient within 1e-5
// relative. Grouped-query / multi-query attention (issue 21) included: K/V
// heads split over 'model' (G = 2) or replicated (G = 1). Run by mpiexec
// with 2 and 4 processes.
//
// Layout (the one `t5x train` uses, trainer/distributed.h): the batch is split
// over 'data' (process d of D feeds rows [d*B/D, (d+1)*B/D)); inside each data
// replica the parameters are split over 'model' by the standard logical-axis
// rules (heads, mlp, vocab, joined_kv, kv_heads when divisible -> model) and every op runs through the
// spmd lowering on the (data=1, model=M) mesh of that replica; the gradients
// (token-sum loss) are summed over 'data'.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mesh/communicator.h"
#include "mesh/logical_axis_rules.h"
#include "nn/constraint.h"
#include "ops/fused.h"
#include "ops/ops.h"
#include "spmd/spmd.h"
#include "t5x/models/models.h"
#include "../../common/mpi_gtest_main.h"
#include "test_util.h"

namespace t5x {
namespace {

std::shared_ptr<Communicator> g_world;

// One mesh (D, M) over the world: the data group (same model coordinate),
// and the spmd context of this process's data replica (mesh (1, M) over the
// processes with this data coordinate).
struct MeshSetup {
  int64_t d = 1, m = 1, data_index = 0;
  std::shared_ptr<Communicator> data;
  std::shared_ptr<spmd::Context> ctx;
  std::string name;
};

std::vector<MeshSetup> meshes() {
  std::vector<MeshSetup> out;
  const int n = g_world->size(), r = g_world->rank();
  for (auto [d, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {2, 2}}) {
    if (d * m != n) continue;
    MeshSetup s;
    s.d = d;
    s.m = m;
    s.data_index = r / m;
    const int model_index = int(r % m);
    s.data = g_world->split(model_index, int(s.data_index));
    auto model = g_world->split(int(s.data_index), model_index);
    s.ctx = std::make_shared<spmd::Context>(Mesh({1, m}, {"data", "model"}, model_index), model);
    s.name = "mesh (data=" + std::to_string(d) + ", model=" + std::to_string(m) + ")";
    out.push_back(std::move(s));
  }
  return out;
}

double rel_err(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) return 1e9;
  double m = 0, s = 1e-3;
  for (size_t i = 0; i < x.size(); ++i) {
    m = std::max(m, double(std::fabs(x[i] - y[i])));
    s = std::max(s, double(std::fabs(y[i])));
  }
  return m / s;
}

Batch rows(const Batch& b, int64_t start, int64_t n) {
  Batch out;
  for (const auto& [k, a] : b) out[k] = slice(a, "batch", start, n);
  return out;
}

// [batch, length, vocab] floats in that order.
std::vector<float> blv(const Array& logits) { return transpose(logits, {"batch", "length", "vocab"}).to_floats(); }

struct ModelCase {
  std::string name;
  std::function<std::unique_ptr<BaseTransformerModel>()> make;
  Batch batch;
};

std::vector<ModelCase> cases() {
  using testing::tokens;
  LossOptions loss;
  loss.z_loss = 1e-3;
  loss.label_smoothing = 0.1;
  // 4 rows (2 per data shard), padding at the ends.
  Batch encdec = {
      {"encoder_input_tokens", tokens(4, 6, {5, 7, 9, 3, 1, 0, 2, 4, 6, 8, 1, 0, 11, 1, 0, 0, 0, 0, 3, 3, 21, 17, 9, 1})},
      {"decoder_input_tokens", tokens(4, 5, {0, 4, 8, 12, 3, 0, 6, 9, 1, 0, 0, 23, 1, 0, 0, 0, 15, 14, 13, 12})},
      {"decoder_target_tokens", tokens(4, 5, {4, 8, 12, 3, 1, 6, 9, 1, 0, 0, 23, 1, 0, 0, 0, 15, 14, 13, 12, 1})},
  };
  Batch deconly = {
      {"decoder_input_tokens", tokens(4, 6, {0, 4, 8, 12, 3, 9, 0, 6, 9, 1, 0, 0, 0, 23, 5, 7, 1, 0, 0, 15, 14, 13, 12, 2})},
      {"decoder_target_tokens", tokens(4, 6, {4, 8, 12, 3, 9, 1, 6, 9, 1, 0, 0, 0, 23, 5, 7, 1, 0, 0, 15, 14, 13, 12, 2, 1})},
      {"decoder_causal_attention", tokens(4, 6, {1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0})},
      {"decoder_loss_weights", tokens(4, 6, {0, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1})},
  };
  auto t511 = testing::small_test_config(/*gated=*/true, /*tied=*/false);
  auto t510 = testing::small_test_config(/*gated=*/false, /*tied=*/true);
  t510.num_encoder_layers = t510.num_decoder_layers = 1;
  auto dec = testing::small_test_config(/*gated=*/true, /*tied=*/true);
  auto gqa = testing::small_test_config(/*gated=*/false, /*tied=*/false);
  gqa.num_heads = 4;
  gqa.num_kv_heads = 2;
  // Multi-query decoder (one K/V head: replicated over 'model') with a
  // grouped-query encoder (2 K/V heads: split).
  auto mqa = gqa;
  mqa.num_kv_heads = 1;
  mqa.encoder_num_kv_heads = 2;
  auto dec_mqa = testing::small_test_config(/*gated=*/true, /*tied=*/true);
  dec_mqa.num_heads = 4;
  dec_mqa.num_kv_heads = 1;
  // FNet encoder (Fourier mixing; its length and embed dims are gathered
  // when split, the batch stays split).
  auto fnet = t511;
  fnet.encoder_mixing = T5Config::Mixing::kFourier;
  // Sparse Mixer's hybrid encoder: linear mixing in layers 0-1 (W_hidden
  // [embed, mlp] split like wi, W_seq replicated), self-attention in layer 2
  // (TOP 1).
  auto mixer = t511;
  mixer.encoder_mixing = T5Config::Mixing::kLinear;
  mixer.encoder_mixing_length = 6;
  mixer.num_encoder_layers = 3;
  mixer.num_encoder_attention_layers = 1;
  // umT5's relative position table in each layer (split over 'model' by
  // heads, as the stacks'), with t5x's GPU network's scaled query input.
  auto umt5 = t511;
  umt5.relpos_per_layer = true;
  umt5.scale_attn_logits = true;
  return {
      {"T5.1.1 enc-dec (gated GELU, untied logits)", [=] { return std::make_unique<EncoderDecoderModel>(t511, loss); },
       encdec},
      {"T5.1.0 enc-dec (ReLU, tied logits)", [=] { return std::make_unique<EncoderDecoderModel>(t510, loss); }, encdec},
      {"decoder-only causal LM", [=] { return std::make_unique<DecoderOnlyModel>(dec, loss, false); }, deconly},
      {"decoder-only prefix LM", [=] { return std::make_unique<DecoderOnlyModel>(dec, loss, true); }, deconly},
      {"enc-dec grouped-query attention", [=] { return std::make_unique<EncoderDecoderModel>(gqa, loss); }, encdec},
      {"enc-dec multi-query decoder, grouped-query encoder",
       [=] { return std::make_unique<EncoderDecoderModel>(mqa, loss); }, encdec},
      {"decoder-only multi-query prefix LM", [=] { return std::make_unique<DecoderOnlyModel>(dec_mqa, loss, true); },
       deconly},
      {"enc-dec FNet encoder (Fourier mixing)", [=] { return std::make_unique<EncoderDecoderModel>(fnet, loss); },
       encdec},
      {"enc-dec Sparse Mixer encoder (linear mixing, TOP attention)",
       [=] { return std::make_unique<EncoderDecoderModel>(mixer, loss); }, encdec},
      {"enc-dec umT5 tables in each layer, scaled attention logits",
       [=] { return std::make_unique<EncoderDecoderModel>(umt5, loss); }, encdec},
  };
}

TEST(ModelsMeshParity, ForwardBackwardEqualsSingleDevice) {
  spmd::install();
  const auto ms = meshes();
  ASSERT_FALSE(ms.empty()) << "run with 2 or 4 processes";
  const LogicalAxisRules rules = standard_logical_axis_rules(1, 1);
  for (const auto& c : cases()) {
    auto model = c.make();
    const ParamTree full = model->init(prng_key(11));
    const int64_t B = c.batch.at("decoder_target_tokens").dim("batch");
    // Single-device reference (fused kernels on, as a single-process run).
    set_fused_kernels_enabled(true);
    auto ref = value_and_grad([&](const ParamTree& p) { return model->loss_fn(p, c.batch).first; }, full);
    std::vector<float> ref_logits;
    {
      NoGradGuard ng;
      ref_logits = blv(model->logits(full, c.batch));
    }
    for (const auto& s : ms) {
      SCOPED_TRACE(c.name + " on " + s.name);
      spmd::ContextScope scope(s.ctx);
      // Fused kernels stay on: on split arrays the op layer routes them to
      // their spmd lowerings, as in `t5x train` on a model axis.
      const int64_t rb = B / s.d;
      Batch mine = rows(c.batch, s.data_index * rb, rb);
      ParamTree sharded = spmd::shard_params(full, rules);
      int split = 0;
      for (const auto& [k, p] : sharded) split += !p.is_fully_local();
      if (s.m > 1) {
        EXPECT_GT(split, 0) << "no parameter is split over 'model'";
      }
      // K/V heads: split over 'model' when it divides them, else replicated.
      for (const auto& [k, p] : sharded)
        if (p.has_dim("kv_heads")) {
          const int64_t g = p.dim("kv_heads");
          EXPECT_EQ(p.local_shape()[p.shape().index("kv_heads")].size, g % s.m == 0 ? g / s.m : g) << k;
        }
      auto got = spmd::value_and_grad([&](const ParamTree& p) { return model->loss_fn(p, mine).first; }, sharded);
      // Loss: a token sum, so the global loss is the sum over 'data'.
      double loss = got.value.item();
      s.data->all_reduce(&loss, &loss, 1, CommDtype::kF64);
      EXPECT_NEAR(loss, ref.value.item(), 1e-5 * std::max(1.0, std::fabs(ref.value.item()))) << "loss";
      // Logits: gather over 'model' (vocab), then the rows over 'data'.
      std::vector<float> lg;
      {
        NoGradGuard ng;
        Array l = model->logits(sharded, mine);
        // The logits stay split over the vocabulary on a model axis.
        if (s.m > 1) {
          EXPECT_FALSE(l.is_fully_local()) << "logits " << spmd::describe_sharded(l);
        }
        lg = blv(spmd::gather(l));
      }
      std::vector<float> all(lg.size() * size_t(s.d));
      s.data->all_gather(lg.data(), all.data(), lg.size(), CommDtype::kF32);
      EXPECT_LE(rel_err(all, ref_logits), 1e-5) << "logits";
      // Gradients: each in its parameter's layout; gathered and summed over 'data'.
      for (const auto& [name, g] : ref.grads) {
        ASSERT_TRUE(got.grads.count(name)) << name;
        const Array& gs = got.grads.at(name);
        EXPECT_EQ(gs.local_shape(), sharded.at(name).local_shape()) << "grad layout of " << name;
        std::vector<float> v = spmd::gather(gs).to_floats();
        s.data->all_reduce(v.data(), v.data(), v.size(), CommDtype::kF32);
        EXPECT_LE(rel_err(v, g.to_floats()), 1e-5) << "grad of " << name;
      }
    }
  }
  set_fused_kernels_enabled(true);
}

// True when the op layer passes rename, comparisons and gated_gelu on split
// arrays to their spmd lowering (src/ops; docs/spmd.md 8, 10). Every process
// gets the same answer (no communication: one layout throughout).
bool op_layer_routes_all(const spmd::Context& ctx) {
  const std::string axis = ctx.mesh().axis_sizes()[0] > 1 ? "data" : "model";
  Array x = spmd::shard(Array::from_vector(Shape{{"batch", 2}}, std::vector<float>{1, -1}), PartitionSpec({{axis}}));
  try {
    (void)gt(x, 0.0);
    (void)rename(x, {{"batch", "rows"}});
    (void)gated_gelu(x, x);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// The same models on ONE mesh (data, model) over all processes, the batch
// split over 'data' by the spmd lowering too, with 1-D and 2-D (embed ->
// data, ZeRO-3 style) parameter rules. Needs the op layer to route the ops
// above to spmd (rename, comparisons, gated_gelu), which it does.
TEST(ModelsMeshParity, FullMeshWithBatchSplitBySpmd) {
  spmd::install();
  const int n = g_world->size();
  for (auto [D, M] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {2, 2}}) {
    if (D * M != n) continue;
    auto ctx = std::make_shared<spmd::Context>(Mesh({D, M}, {"data", "model"}, g_world->rank()), g_world);
    spmd::ContextScope scope(ctx);
    ASSERT_TRUE(op_layer_routes_all(*ctx)) << "src/ops must dispatch rename / comparisons / gated_gelu on split arrays";
    for (int param_dims : {1, 2}) {
      const LogicalAxisRules rules = standard_logical_axis_rules(1, param_dims);
      for (const auto& c : cases()) {
        SCOPED_TRACE(c.name + " on mesh (" + std::to_string(D) + ", " + std::to_string(M) + "), parameter dims " +
                     std::to_string(param_dims));
        auto model = c.make();
        const ParamTree full = model->init(prng_key(11));
        ValueAndGrad ref;
        std::vector<float> ref_logits;
        {
          spmd::ContextScope single(nullptr);
          set_fused_kernels_enabled(true);
          ref = value_and_grad([&](const ParamTree& p) { return model->loss_fn(p, c.batch).first; }, full);
          NoGradGuard ng;
          ref_logits = blv(model->logits(full, c.batch));
        }
        ParamTree sharded = spmd::shard_params(full, rules);
        Batch b;
        for (const auto& [k, a] : c.batch) b[k] = spmd::shard(a, PartitionSpec({{"data"}, {}}));
        if (D > 1) {
          EXPECT_FALSE(b.at("decoder_target_tokens").is_fully_local());
        }
        auto got = spmd::value_and_grad([&](const ParamTree& p) { return model->loss_fn(p, b).first; }, sharded);
        EXPECT_NEAR(got.value.item(), ref.value.item(), 1e-5 * std::max(1.0, std::fabs(ref.value.item()))) << "loss";
        {
          NoGradGuard ng;
          EXPECT_LE(rel_err(blv(spmd::gather(model->logits(sharded, b))), ref_logits), 1e-5) << "logits";
        }
        for (const auto& [name, g] : ref.grads) {
          const Array& gs = got.grads.at(name);
          EXPECT_EQ(gs.local_shape(), sharded.at(name).local_shape()) << "grad layout of " << name;
          EXPECT_LE(rel_err(spmd::gather(gs).to_floats(), g.to_floats()), 1e-5) << "grad of " << name;
        }
      }
    }
  }
  set_fused_kernels_enabled(true);
}

// Issue 18 acceptance: a tiny MoE T5 (4 experts, top-2, one sparse layer per
// stack, expert losses in the loss) on meshes (data, expert, model) =
// (2,1,1), (1,2,1), (2,2,1), (1,4,1) with t5x's MoE rules (batch ->
// (expert, data)) and the activation constraint installed (as the Trainer
// does): loss, logits and every gradient equal one process's run with the
// mesh's grouping (num_expert_replicas = |data|) within 1e-5; the expert
// kernels and their gradients are split over 'expert', the sparse layers'
// experts exchange tokens by all-to-all and nothing is all-gathered.
// One MoE model on the (data, expert) meshes of the process count; `make`
// gives the config for X expert partitions; `expert_kernel` is a sparse
// layer's expert kernel, checked split over 'expert'.
void check_moe_on_data_expert_meshes(const std::string& what, const std::function<T5Config(int64_t)>& make,
                                     const std::string& expert_kernel) {
  spmd::install();
  const int n = g_world->size();
  for (auto [D, X] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {2, 2}, {1, 4}}) {
    if (D * X != n) continue;
    SCOPED_TRACE(what + " on mesh (data=" + std::to_string(D) + ", expert=" + std::to_string(X) + ")");
    const T5Config c = make(X);
    LossOptions loss;
    loss.aux_loss_factor = 0.5;
    loss.router_z_loss_factor = 0.25;
    const Batch batch = cases()[0].batch;
    T5Config one = c;
    one.moe.num_expert_replicas = D;  // the mesh's grouping on one process
    EncoderDecoderModel ref_model(one, loss), model(c, loss);
    const ParamTree full = model.init(prng_key(13));
    ValueAndGrad ref;
    std::vector<float> ref_logits;
    {
      spmd::ContextScope single(nullptr);
      ref = value_and_grad([&](const ParamTree& p) { return ref_model.loss_fn(p, batch).first; }, full);
      NoGradGuard ng;
      ref_logits = blv(ref_model.logits(full, batch));
    }
    auto ctx = std::make_shared<spmd::Context>(Mesh({D, X, 1}, {"data", "expert", "model"}, g_world->rank()), g_world);
    spmd::ContextScope scope(ctx);
    const LogicalAxisRules rules = moe_logical_axis_rules(1, 1);
    nn::ActivationConstraintScope hook([&](const Array& a) { return spmd::with_sharding_constraint(a, rules); });
    ParamTree sharded = spmd::shard_params(full, rules);
    EXPECT_EQ(sharded.at(expert_kernel).local_shape().size("expert"), 4 / X);
    Batch b;
    for (const auto& [k, a] : batch) b[k] = spmd::shard(a, PartitionSpec({{"expert", "data"}, {}}));
    ctx->groups().reset_counters();
    auto got = spmd::value_and_grad([&](const ParamTree& p) { return model.loss_fn(p, b).first; }, sharded);
    const CommCounters cc = ctx->groups().total_counters();
    EXPECT_NEAR(got.value.item(), ref.value.item(), 1e-5 * std::max(1.0, std::fabs(ref.value.item()))) << "loss";
    {
      NoGradGuard ng;
      EXPECT_LE(rel_err(blv(spmd::gather(model.logits(sharded, b))), ref_logits), 1e-5) << "logits";
    }
    for (const auto& [name, g] : ref.grads) {
      const Array& gs = got.grads.at(name);
      EXPECT_EQ(gs.local_shape(), sharded.at(name).local_shape()) << "grad layout of " << name;
      EXPECT_LE(rel_err(spmd::gather(gs).to_floats(), g.to_floats()), 1e-5) << "grad of " << name;
    }
    EXPECT_EQ(cc.bytes[size_t(Collective::kAllGather)], 0.0) << "nothing all-gathered";
    if (X > 1) {
      EXPECT_GT(cc.bytes[size_t(Collective::kAllToAll)], 0.0) << "tokens reach their experts by all-to-all";
    }
    if (g_world->rank() == 0) {
      std::printf("[%s mesh (data=%lld, expert=%lld)] loss+grads, bytes sent by rank 0:", what.c_str(), (long long)D,
                  (long long)X);
      for (int i = 0; i < kNumCollectives; ++i)
        if (cc.calls[size_t(i)])
          std::printf(" %s %lld calls %.0f B;", collective_name(Collective(i)), (long long)cc.calls[size_t(i)],
                      cc.bytes[size_t(i)]);
      std::printf("\n");
    }
  }
}

TEST(ModelsMeshParity, MoeT5OnDataExpertMeshes) {
  check_moe_on_data_expert_meshes("MoE T5", [](int64_t X) {
    T5Config c = testing::small_test_config(/*gated=*/true, /*tied=*/false);
    c.moe.num_experts = 4;
    c.moe.expert_mlp_dim = 16;
    c.moe.activations = {"gelu", "linear"};
    c.moe.num_selected_experts = 2;
    c.moe.min_expert_capacity = 1;
    c.moe.num_expert_partitions = X;
    c.num_encoder_sparse_layers = 1;
    c.num_decoder_sparse_layers = 1;
    return c;
  }, "encoder/layers_1/mlp/expert/wo/kernel");
}

// Sparse Mixer (configs/models/sparse_mixer/tiny.gin's layout): 3 encoder
// layers, linear mixing in 0-1, attention in 2 (TOP), an experts-choose MoE
// in layer 1 (MIDDLE), dense decoder.
TEST(ModelsMeshParity, SparseMixerOnDataExpertMeshes) {
  check_moe_on_data_expert_meshes("Sparse Mixer", [](int64_t X) {
    T5Config c = testing::small_test_config(/*gated=*/true, /*tied=*/false);
    c.encoder_mixing = T5Config::Mixing::kLinear;
    c.encoder_mixing_length = 6;
    c.num_encoder_layers = 3;
    c.num_encoder_attention_layers = 1;
    c.moe.num_experts = 4;
    c.moe.expert_mlp_dim = 16;
    c.moe.activations = {"gelu", "linear"};
    c.moe.router = nn::RouterType::kExpertsChooseMasked;
    c.moe.train_capacity_factor = c.moe.eval_capacity_factor = 1.0;
    c.moe.min_expert_capacity = 1;
    c.moe.num_expert_partitions = X;
    c.num_encoder_sparse_layers = 1;
    c.encoder_sparse_layout = T5Config::SparseLayout::kMiddle;
    return c;
  }, "encoder/layers_1/mlp/expert/wo/kernel");
}

}  // namespace
}  // namespace t5x

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  t5x::g_world = t5x::init_communicator(t5x::CommBackend::kAny);
  const int rc = t5x::testing_mpi::run_all_tests_on_every_rank(*t5x::g_world);
  t5x::spmd::set_context(nullptr);
  return rc;
}
