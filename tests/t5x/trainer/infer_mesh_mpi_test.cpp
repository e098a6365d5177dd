// `t5x infer`, `t5x score` and `t5x eval` on one (data, model) mesh (issue
// 17), under mpiexec -np 4: on meshes (2,1) and (1,2) (the world cut into two
// halves of 2 processes, each its own run) and (2,2), with
// parameter_partitioning_dims 1 and 2, the files process 0 writes equal one
// process's: greedy predictions token for token, scores within 1e-5
// relative; each process holds only its parameter shards (the bytes the
// logical-axis layout gives, e.g. 25% on (2,2) with 2-D partitioning), and
// the KV cache of a decode step is split as its layout says (batch over
// 'data', heads over 'model'). `t5x eval` and the inference evaluation
// during training on (2,2) write one process's metrics and predictions. Top-k
// sampling on the three meshes predicts one process's tokens.
#include <gtest/gtest.h>

#include <filesystem>

#include "../../common/mpi_gtest_main.h"
#include "spmd/spmd.h"
#include "t5x/models/network.h"
#include "t5x/trainer/evaluation.h"
#include "t5x/trainer/infer.h"
#include "t5x/trainer/train_state.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x {
std::shared_ptr<Communicator> g_world;
}

namespace t5x::trainer {
namespace {

// The tiny model trained 6 steps by process 0 alone, in a directory every
// rank sees (collective: every rank calls it first). The learning rate is
// small enough that greedy decoding still emits many tokens before EOS.
const std::string& trained_dir() {
  static std::string dir = [] {
    std::string d = testing::shared_temp_dir(*g_world, "infer_mesh_model");
    if (g_world->rank() == 0) {
      TrainerOptions o;
      o.durable_checkpoints = false;
      auto b = testing::tiny_bindings(d, 6);
      b.push_back("utils.create_learning_rate_scheduler.base_learning_rate = 0.0001");
      Trainer t(read_train_config(testing::tiny_config(b)),
                Distributed::create(PartitionerConfig{}, make_single_communicator()), o);
      t.train();
    }
    g_world->barrier();
    return d;
  }();
  return dir;
}

std::vector<std::string> bindings(int64_t num_partitions, int param_dims) {
  return {"MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
          "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}",
          "CHECKPOINT_PATH = '" + trained_dir() + "/checkpoint_6'",
          "MIXTURE_OR_TASK_SPLIT = 'validation'",
          "BATCH_SIZE = 5",  // 20 examples; on |data| = 2 each batch is padded to 6 rows
          "ACTIVATION_DTYPE = 'float32'",
          "network.T5Config.vocab_size = 1152",
          "network.T5Config.emb_dim = 32",
          "network.T5Config.head_dim = 8",
          "network.T5Config.mlp_dim = 64",
          "partitioning.PjitPartitioner.num_partitions = " + std::to_string(num_partitions),
          "partitioning.standard_logical_axis_rules.parameter_partitioning_dims = " + std::to_string(param_dims)};
}

InferRunConfig infer_config(const std::string& out_dir, const std::string& mode, int64_t num_partitions,
                            int param_dims) {
  auto b = bindings(num_partitions, param_dims);
  b.push_back("INFER_OUTPUT_DIR = '" + out_dir + "'");
  b.push_back("infer_script.infer.checkpoint_period = 2");
  b.push_back("infer_script.infer.mode = '" + mode + "'");
  return read_infer_config(testing::tiny_config(b, "configs/runs/infer.gin"));
}

Distributed single() { return Distributed::create(PartitionerConfig{}, make_single_communicator()); }

// This process's share of the parameter bytes under the run's layout.
double expected_fraction(const InferRunConfig& c, const Distributed& d) {
  std::map<std::string, Shape> shapes;
  for (const auto& s : make_model(c.model)->param_specs()) shapes[s.name] = s.shape;
  spmd::ContextScope scope(d.spmd);
  const auto rules = standard_logical_axis_rules(c.partitioner.activation_partitioning_dims,
                                                 c.partitioner.parameter_partitioning_dims);
  return spmd::param_bytes(shapes, DType::f32, rules, 0).fraction();
}

struct Mesh2 {
  int64_t data, model;
};

TEST(InferMesh, PredictAndScoreEqualOneProcessWithShardedParameters) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  (void)trained_dir();
  const std::string ref_dir = testing::shared_temp_dir(*g_world, "infer_mesh_ref");
  if (g_world->rank() == 0)
    for (const char* mode : {"predict", "score"}) {
      InferStats s = run_infer(infer_config(ref_dir, mode, 1, 1), single());
      EXPECT_EQ(s.param_bytes, s.model_param_bytes);
    }
  g_world->barrier();
  const testing::InferFiles ref = testing::read_infer_files(ref_dir);
  testing::expect_substantial_reference(ref);
  if (HasFatalFailure()) return;

  const int half = g_world->rank() / 2;
  std::shared_ptr<Communicator> halves = g_world->split(half, g_world->rank());
  for (Mesh2 m : {Mesh2{2, 1}, Mesh2{1, 2}, Mesh2{2, 2}})
    for (int param_dims : {1, 2}) {
      const std::string what = "mesh (" + std::to_string(m.data) + "," + std::to_string(m.model) +
                               "), parameter dims " + std::to_string(param_dims);
      SCOPED_TRACE(what);
      const bool whole = m.data * m.model == 4;
      std::shared_ptr<Communicator> world = whole ? g_world : halves;
      const std::string dir = testing::shared_temp_dir(
          *world, "infer_mesh_" + std::to_string(m.data) + std::to_string(m.model) + "p" +
                      std::to_string(param_dims) + (whole ? "" : "h" + std::to_string(half)));
      for (const char* mode : {"predict", "score"}) {
        const InferRunConfig c = infer_config(dir, mode, m.model, param_dims);
        const Distributed d = Distributed::create(c.partitioner, world);
        ASSERT_EQ(d.num_data_shards, m.data);
        ASSERT_EQ(d.num_model_shards, m.model);
        const InferStats s = run_infer(c, d);
        EXPECT_EQ(s.examples, 20);
        // Only this process's shards: the bytes the layout gives it.
        const double fraction = s.param_bytes / s.model_param_bytes;
        EXPECT_NEAR(fraction, expected_fraction(c, d), 1e-12);
        EXPECT_LT(fraction, param_dims == 2 || m.model > 1 ? 0.6 : 1.01);
        if (param_dims == 2 && whole) {
          EXPECT_LE(fraction, 0.27);
        }
        if (g_world->rank() == 0 && std::string(mode) == "score")
          std::printf("[infer mesh] %s: %.1f%% of the parameter bytes per process\n", what.c_str(), 100 * fraction);
      }
      world->barrier();
      // Process 0 of the run wrote one process's file; every rank checks it.
      EXPECT_FALSE(std::filesystem::exists(dir + "/gpl3_lines_copy-predict.jsonl-00001-of-00002"));
      testing::expect_same_infer_files(testing::read_infer_files(dir), ref);
    }
}

// Top-k sampling (temperature_sample, topk 3 at temperature 1: the draw from
// the step's candidates) on (2,1), (1,2) and (2,2) predicts one process's
// tokens: the draw is of the global batch, so it does not depend on the
// mesh. Batches of 4 rows, which every mesh here holds without padding (a
// padded batch is another draw: the noise's layout follows the row count).
TEST(InferMesh, TopKSamplingPredictsOneProcessTokens) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  (void)trained_dir();
  auto config = [](const std::string& out, int64_t num_partitions) {
    auto b = bindings(num_partitions, 1);
    b.push_back("BATCH_SIZE = 4");
    b.push_back("models.EncoderDecoderModel.decode_fn = @decoding.temperature_sample");
    b.push_back("decoding.temperature_sample.topk = 3");
    b.push_back("INFER_OUTPUT_DIR = '" + out + "'");
    b.push_back("infer_script.infer.mode = 'predict'");
    return read_infer_config(testing::tiny_config(b, "configs/runs/infer.gin"));
  };
  const std::string file = "/gpl3_lines_copy-predict.jsonl-00000-of-00001";
  const std::string own = testing::temp_dir("infer_mesh_topk_ref");
  std::vector<nlohmann::json> ref;
  if (g_world->rank() == 0) {
    run_infer(config(own, 1), single());
    ref = testing::read_jsonl(own + file);
  }
  std::shared_ptr<Communicator> halves = g_world->split(g_world->rank() / 2, g_world->rank());
  for (Mesh2 m : {Mesh2{2, 1}, Mesh2{1, 2}, Mesh2{2, 2}}) {
    SCOPED_TRACE("mesh (" + std::to_string(m.data) + "," + std::to_string(m.model) + ")");
    const bool whole = m.data * m.model == 4;
    std::shared_ptr<Communicator> world = whole ? g_world : halves;
    const std::string dir = testing::shared_temp_dir(
        *world, "infer_mesh_topk_" + std::to_string(m.data) + std::to_string(m.model) +
                    (whole ? "" : "h" + std::to_string(g_world->rank() / 2)));
    const InferRunConfig c = config(dir, m.model);
    const Distributed d = Distributed::create(c.partitioner, world);
    ASSERT_EQ(d.num_data_shards, m.data);
    run_infer(c, d);
    world->barrier();
    if (g_world->rank() == 0) {
      ASSERT_EQ(ref.size(), 20u);
      EXPECT_EQ(testing::read_jsonl(dir + file), ref);
    }
  }
}

// `t5x eval` on (2,2): every process decodes its rows; the metrics are one process's.
TEST(InferMesh, EvalOnTheMeshGivesOneProcessMetrics) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  (void)trained_dir();
  auto eval_config = [](const std::string& out, int64_t num_partitions) {
    auto b = bindings(num_partitions, 2);
    b.push_back("EVAL_OUTPUT_DIR = '" + out + "'");
    return read_eval_config(testing::tiny_config(b, "configs/runs/eval.gin"));
  };
  std::map<std::string, double> ref;
  const std::string own = testing::temp_dir("infer_mesh_eval_ref");
  if (g_world->rank() == 0) ref = run_eval(eval_config(own, 1), single()).at("gpl3_lines_copy");
  const std::string dir = testing::shared_temp_dir(*g_world, "infer_mesh_eval");
  const EvalRunConfig c = eval_config(dir, 2);
  const auto got = run_eval(c, Distributed::create(c.partitioner, g_world)).at("gpl3_lines_copy");
  if (g_world->rank() == 0) {
    ASSERT_FALSE(ref.empty());
    EXPECT_EQ(got, ref);
    EXPECT_EQ(testing::read_jsonl(dir + "/inference_eval/gpl3_lines_copy-000006.jsonl"),
              testing::read_jsonl(own + "/inference_eval/gpl3_lines_copy-000006.jsonl"));
  }
}

// The inference evaluation during training on (2,2) with 2-D parameters:
// it decodes with the trainer's sharded parameters (evaluation before
// training, on the initial ones) and writes one process's predictions.
TEST(InferMesh, InferenceEvalDuringTrainingDecodesOnTheMesh) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  (void)trained_dir();
  auto run = [](const std::string& dir, std::shared_ptr<Communicator> world, int64_t num_partitions) {
    auto b = testing::tiny_bindings(dir, 1);
    for (const std::string& x : testing::infer_eval_bindings()) b.push_back(x);
    b.push_back("train_script.train.run_eval_before_training = True");
    b.push_back("partitioning.PjitPartitioner.num_partitions = " + std::to_string(num_partitions));
    b.push_back("partitioning.standard_logical_axis_rules.parameter_partitioning_dims = 2");
    const TrainRunConfig c = read_train_config(testing::tiny_config(b));
    TrainerOptions o;
    o.durable_checkpoints = false;
    Trainer t(c, Distributed::create(c.partitioner, std::move(world)), o);
    t.train();
    return testing::read_jsonl(dir + "/inference_eval/gpl3_lines_copy-000000.jsonl");
  };
  const std::string own = testing::temp_dir("infer_eval_ref");
  std::vector<nlohmann::json> ref;
  if (g_world->rank() == 0) ref = run(own, make_single_communicator(), 1);
  const auto got = run(testing::shared_temp_dir(*g_world, "infer_eval_mesh"), g_world, 2);
  if (g_world->rank() == 0) {
    ASSERT_EQ(ref.size(), 20u);
    size_t chars = 0;
    for (const auto& r : ref) chars += r["prediction"].get<std::string>().size();
    EXPECT_GT(chars, 20 * 10u) << "the initial parameters decode little: the comparison would be weak";
    EXPECT_EQ(got, ref);
  }
}

// The decode steps' KV cache on (2,1), (1,2) and (2,2): [batch, kv_length,
// heads, kv] split over 'data' and 'model' (the cross-attention keys and
// values too), before and after every step.
TEST(InferMesh, KvCacheIsSplitAsItsLayoutSays) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  (void)trained_dir();
  std::shared_ptr<Communicator> halves = g_world->split(g_world->rank() / 2, g_world->rank());
  for (Mesh2 m : {Mesh2{2, 1}, Mesh2{1, 2}, Mesh2{2, 2}})
  for (int param_dims : {1, 2}) {
    SCOPED_TRACE("mesh (" + std::to_string(m.data) + "," + std::to_string(m.model) + "), parameter dims " +
                 std::to_string(param_dims));
    const InferRunConfig c = infer_config(testing::temp_dir("kv_unused"), "predict", m.model, param_dims);
    const Distributed d = Distributed::create(c.partitioner, m.data * m.model == 4 ? g_world : halves);
    const auto rules = standard_logical_axis_rules(1, param_dims);
    auto model = make_model(c.model);
    const T5Config& cfg = model->config();
    MeshScope on_mesh(d, rules);
    const ParamTree p = init_params_on_mesh(*model, prng_key(1), rules);
    const int64_t B = 6, L = 5;
    std::vector<int64_t> toks(size_t(B * L));
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = 2 + int64_t(i % 9);
    const Array enc =
        mesh_batch({{"t", Array::from_ints(Shape{{"batch", B}, {"length", L}}, toks, DType::i32)}}, d).at("t");
    nn::Dropout none;
    NoGradGuard ng;
    DecoderCache cache = t5_init_decoder_cache(cfg, p, t5_encode(cfg, p, enc, Array(), none), enc, L);
    // Rows over 'data', heads over 'model'; the other dims whole.
    auto split_as_laid_out = [&](const Array& a) {
      const Shape l = a.local_shape();
      return l.size("batch") == B / m.data && l.size("heads") == cfg.num_heads / m.model &&
             a.local_size() * m.data * m.model == a.size();
    };
    for (int step = 0; step <= L; ++step) {
      SCOPED_TRACE("after " + std::to_string(step) + " steps");
      for (size_t i = 0; i < cache.self_key.size(); ++i) {
        EXPECT_TRUE(split_as_laid_out(cache.self_key[i])) << cache.self_key[i].local_shape().to_string();
        EXPECT_TRUE(split_as_laid_out(cache.self_value[i])) << cache.self_value[i].local_shape().to_string();
        EXPECT_TRUE(split_as_laid_out(cache.cross_key[i])) << cache.cross_key[i].local_shape().to_string();
        EXPECT_TRUE(split_as_laid_out(cache.cross_value[i])) << cache.cross_value[i].local_shape().to_string();
      }
      if (step == L) break;
      const Array logits = t5_decode_step(cfg, p, cache, Array::from_ints(Shape{{"batch", B}}, std::vector<int64_t>(size_t(B), 3 + step), DType::i32));
      EXPECT_EQ(logits.dim("batch"), B);
    }
  }
}

}  // namespace
}  // namespace t5x::trainer

int main(int argc, char** argv) { return t5x::testing_mpi::main_on_every_rank(argc, argv, t5x::g_world, [] {}); }
