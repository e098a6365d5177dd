// Trainer: gin -> run config, the loss falls on a real task, kill-and-resume
// gives bitwise-equal parameters, NaN stops cleanly, summaries read back,
// microbatching equals the full batch; issue 22's cache, final-eval and
// vocabulary cases.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <fstream>
#include <nlohmann/json.hpp>

#include "seqio/cache.h"
#include "seqio/errors.h"
#include "seqio/task.h"
#include "seqio/preprocessors/noise.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/optim/adafactor.h"
#include "t5x/trainer/partition_report.h"
#include "t5x/optim/adamw.h"
#include "t5x/optim/lion.h"
#include "t5x/optim/sgd.h"
#include "t5x/summaries/event_writer.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x::trainer {
namespace {

namespace fs = std::filesystem;
using testing::temp_dir;
using testing::tiny_bindings;
using testing::tiny_config;

Distributed single() { return Distributed::create(PartitionerConfig{}, make_single_communicator()); }

TrainerOptions fast() {
  TrainerOptions o;
  o.durable_checkpoints = false;  // no fsync: the tests do not crash the machine
  return o;
}

// read_train_config of the tiny run with `extra` bindings must fail, its
// message holding `message`.
void expect_refused(const std::string& dir, const std::vector<std::string>& extra, const std::string& message,
                    const std::string& run_file = "configs/runs/pretrain.gin",
                    const std::string& model_file = "configs/models/t5_1_1/tiny.gin") {
  auto b = tiny_bindings(dir, 4);
  b.insert(b.end(), extra.begin(), extra.end());
  try {
    read_train_config(tiny_config(b, run_file, model_file));
    ADD_FAILURE() << extra.back() << " was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << extra.back() << ": " << e.what();
  }
}

TrainRunConfig tiny_run(const std::string& dir, int steps, std::vector<std::string> extra = {}) {
  auto b = tiny_bindings(dir, steps);
  b.insert(b.end(), extra.begin(), extra.end());
  return read_train_config(tiny_config(b));
}

// What reading the tiny run with `extra` throws (std::invalid_argument), or "<no error>".
std::string read_error(const std::vector<std::string>& extra) {
  try {
    tiny_run(temp_dir("read_error"), 2, extra);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::string("<no error>");
}

double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}

TEST(TrainerConfig, ReadsTheGinRun) {
  std::string dir = temp_dir("cfg");
  TrainRunConfig c = tiny_run(dir, 12, {"trainer.Trainer.num_microbatches = 2"});
  EXPECT_EQ(c.model_dir, dir);
  EXPECT_EQ(c.total_steps, 12);
  EXPECT_EQ(c.num_microbatches, 2);
  EXPECT_EQ(c.train_ds.mixture_or_task_name, "gpl3_lines_copy");
  EXPECT_EQ(c.train_ds.batch_size, 8);
  EXPECT_EQ(c.train_ds.split, "train");
  EXPECT_TRUE(c.train_ds.pack);
  EXPECT_EQ(c.train_ds.task_feature_lengths->at("targets"), 24);
  ASSERT_TRUE(c.train_eval_ds);
  EXPECT_EQ(c.train_eval_ds->split, "validation");
  EXPECT_FALSE(c.infer_eval_ds);
  EXPECT_EQ(c.save.period, 2);
  EXPECT_EQ(c.partitioner.num_partitions, 1);
  EXPECT_EQ(c.model.network.emb_dim, 32);
  EXPECT_EQ(c.model.network.num_heads, 4);  // tiny.gin
  EXPECT_EQ(c.model.network.num_encoder_layers, 2);
  EXPECT_EQ(c.model.network.mlp_activations, (std::vector<std::string>{"gelu", "linear"}));
  EXPECT_DOUBLE_EQ(c.model.loss.z_loss, 1e-4);
  EXPECT_EQ(c.optimizer.optimizer->name(), "adafactor.Adafactor");
  EXPECT_DOUBLE_EQ(c.optimizer.schedule(0), 0.05);
  EXPECT_EQ(c.random_seed, 7);
  EXPECT_EQ(c.partitioner.activation_partitioning_dims, 1);
  EXPECT_EQ(c.partitioner.parameter_partitioning_dims, 1);
  // partitioning.PjitPartitioner.logical_axis_rules = @partitioning.standard_logical_axis_rules()
  TrainRunConfig c2 = tiny_run(dir, 12, {"partitioning.standard_logical_axis_rules.parameter_partitioning_dims = 2",
                                         "partitioning.PjitPartitioner.num_partitions = 2"});
  EXPECT_EQ(c2.partitioner.parameter_partitioning_dims, 2);
  EXPECT_EQ(c2.partitioner.activation_partitioning_dims, 1);
  EXPECT_EQ(c2.partitioner.num_partitions, 2);
}

// Values past what a run can hold are refused by name (bad-input sweep,
// session 59): BATCH_SIZE was truncated to 32 bits, a TRAIN_STEPS past int32
// (the checkpoints' step) ran on, a 2e9-token length died in the kernel's
// out-of-memory killer, a negative warmup gave an infinite learning rate.
TEST(TrainerConfig, OutOfRangeValuesAreRefusedByName) {
  const std::string dir = temp_dir("cfg_range");
  const std::pair<std::string, std::string> cases[] = {
      {"BATCH_SIZE = 2147483648", "batch_size (BATCH_SIZE) must be in [1, 2^31 - 1], got 2147483648"},
      {"TRAIN_STEPS = 2147483648", "total_steps (TRAIN_STEPS) must be in [0, 2^31 - 1], got 2147483648"},
      {"TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 2000000000}",
       "task_feature_lengths['targets'] must be in [1, 1048576], got 2000000000"},
      {"utils.create_learning_rate_scheduler.warmup_steps = -10",
       "utils.create_learning_rate_scheduler.warmup_steps must be >= 0, got -10"},
      {"utils.create_learning_rate_scheduler.base_learning_rate = nan",
       "utils.create_learning_rate_scheduler.base_learning_rate must be finite, got nan"},
      {"network.T5Config.vocab_size = 10",
       "network.T5Config.vocab_size = 10 is smaller than the vocabulary of task 'gpl3_lines_copy'"},
      {"MODEL_DIR = ''", "model_dir (MODEL_DIR) is empty"},
      {"utils.SaveCheckpointConfig.period = -1", "utils.SaveCheckpointConfig.period must be >= 0, got -1"},
      {"utils.SaveCheckpointConfig.keep = 0",
       "utils.SaveCheckpointConfig.keep must be >= 1, got 0\n  hint: None keeps every checkpoint"},
      {"utils.SaveCheckpointConfig.keep = -1",
       "utils.SaveCheckpointConfig.keep must be >= 1, got -1\n  hint: None keeps every checkpoint"},
      {"train_script.train.eval_period = -3", "train_script.train.eval_period must be >= 0, got -3"},
      {"MODEL_DIR = '" + dir + "/a_file'", "(MODEL_DIR) '" + dir + "/a_file' is a file, not a directory"},
      // A checkpoint given as MODEL_DIR (meant: resume from it) would have
      // started a new run inside it (bad-input sweep, session 78).
      {"MODEL_DIR = '" + dir + "/run/checkpoint_20/'",
       "(MODEL_DIR) '" + dir + "/run/checkpoint_20/' is a checkpoint, not a run's directory\n  hint: to resume "
       "its run, give the directory that holds it (" + dir + "/run); to fine-tune from it, set "
       "INITIAL_CHECKPOINT_PATH to it"},
  };
  std::ofstream(dir + "/a_file") << "x";
  fs::create_directories(dir + "/run/checkpoint_20");
  std::ofstream(dir + "/run/checkpoint_20/checkpoint") << "x";  // the msgpack
  for (const auto& [binding, message] : cases) {
    auto b = tiny_bindings(dir, 4);
    b.push_back(binding);
    try {
      read_train_config(tiny_config(b));
      ADD_FAILURE() << binding << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << binding << ": " << e.what();
    }
  }
  auto ok = tiny_bindings(dir, 4);
  ok.push_back("TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 1048576}");
  EXPECT_NO_THROW(read_train_config(tiny_config(ok)));
}

// Settings out of range are named at their binding before the run writes
// anything (bad-input sweep, session 78: a nan temperature decoded empty
// predictions, a negative z_loss trained to a negative loss, an int8 save
// dtype failed at the first save, after the steps before it).
TEST(TrainerConfig, SettingsOutOfRangeAreNamedAtTheirBinding) {
  const std::string dir = temp_dir("cfg_ranges");
  const std::pair<std::string, std::string> cases[] = {
      {"decoding.temperature_sample.temperature = nan", "decoding.temperature_sample.temperature = nan is out of range"},
      {"decoding.temperature_sample.temperature = -1.0", "temperature = -1.0 is out of range"},
      {"decoding.temperature_sample.topk = -1", "decoding.temperature_sample.topk = -1 is out of range"},
      {"decoding.temperature_sample.topp = 1.5", "decoding.temperature_sample.topp = 1.5 is out of range"},
      {"decoding.temperature_sample.topp = nan", "topp = nan is out of range"},
      {"decoding.temperature_sample.topp = 0.9", "topk = 1 and topp = 0.9 are mutually exclusive"},
      {"decoding.beam_search.alpha = nan", "decoding.beam_search.alpha = nan is out of range"},
      {"models.EncoderDecoderModel.z_loss = -1.0", "models.EncoderDecoderModel.z_loss = -1.0 must be finite and >= 0"},
      {"models.EncoderDecoderModel.loss_normalizing_factor = 0.0",
       "models.EncoderDecoderModel.loss_normalizing_factor = 0.0 must be a finite number > 0"},
      {"models.EncoderDecoderModel.loss_normalizing_factor = -5.0", "loss_normalizing_factor = -5.0 must be"},
      {"utils.SaveCheckpointConfig.dtype = 'int8'", "utils.SaveCheckpointConfig.dtype = 'int8' is not a parameter dtype"},
      {"utils.RestoreCheckpointConfig.mode = 'bogus'", "utils.RestoreCheckpointConfig.mode = 'bogus' is not a mode"},
      {"utils.RestoreCheckpointConfig.mode = 'all'", "mode = 'all' (every checkpoint in turn) is not supported"},
      {"utils.RestoreCheckpointConfig.dtype = 'int8'", "utils.RestoreCheckpointConfig.dtype = 'int8' is not a"},
      // The optimizer's: nan passed `x < 0 || x >= 1`, and the run stopped
      // at step 1 blaming the learning rate.
      {"adafactor.Adafactor.beta1 = nan", "beta1 must be in [0, 1), got nan"},
      {"adafactor.Adafactor.clipping_threshold = nan", "clipping_threshold must be finite and > 0, got nan"},
      {"adafactor.Adafactor.decay_rate = nan", "decay_rate must be finite, got nan"},
      {"adafactor.Adafactor.epsilon1 = -1.0", "epsilon1 must be finite and > 0, got -1"},
      {"adafactor.Adafactor.weight_decay_rate = nan", "weight_decay_rate must be finite, got nan"},
      // Found in the first batch or forward before, after checkpoint_0.
      {"network.T5Config.mlp_activations = ('bogus', 'linear')",
       "network.T5Config.mlp_activations: 'bogus' is not an activation"},
      {"TASK_FEATURE_LENGTHS = {'inputs': 24}",
       "TASK_FEATURE_LENGTHS) of 'gpl3_lines_copy': [EncDecFeatureConverter] task_feature_lengths is missing "
       "features of TASK_FEATURES: ['targets']"},
      {"TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24, 'bogus': 5}",
       "task_feature_lengths has features not in TASK_FEATURES: ['bogus']"},
  };
  for (const auto& [binding, message] : cases)
    expect_refused(dir, {"INITIAL_CHECKPOINT_PATH = '" + dir + "/none'", binding}, message, "configs/runs/finetune.gin");
  EXPECT_FALSE(fs::exists(dir + "/checkpoint_0"));
  // The MoE layer's factors and init scale.
  for (const auto& [binding, message] : std::vector<std::pair<std::string, std::string>>{
           {"TRAIN_EXPERT_CAPACITY_FACTOR = nan", "train_capacity_factor = nan must be a finite number > 0"},
           {"EVAL_EXPERT_CAPACITY_FACTOR = 0.0", "eval_capacity_factor = 0.0 must be a finite number > 0"},
           {"EXPERT_INIT_SCALE = -1.0", "expert_init_scale = -1.0 must be a finite number > 0"},
           {"JITTER_NOISE = nan", "jitter_noise = nan must be finite and >= 0"}})
    expect_refused(dir, {binding}, message, "configs/runs/moe/pretrain.gin", "configs/models/moe/tiny.gin");
}

// A task without the evaluation's split is said to be skipped (the
// training evaluation did nothing, silently; session 78).
TEST(Trainer, EvaluationSplitATaskLacksIsSaid) {
  auto b = tiny_bindings(temp_dir("eval_no_split"), 2);
  b.push_back("train_script.train.eval_period = 2");
  b.push_back("train_eval/utils.DatasetConfig.split = 'nope'");
  std::ostringstream log;
  TrainerOptions o = fast();
  o.log = &log;
  Trainer t(read_train_config(tiny_config(b)), single(), o);
  EXPECT_EQ(t.train().status, TrainResult::Status::kDone);
  EXPECT_NE(log.str().find("warning: task 'gpl3_lines_copy' has no split 'nope', so the training evaluation skips it"),
            std::string::npos)
      << log.str();
}

// The MoE mesh's 'expert' axis not dividing the experts names the setting
// to change, not the 'model' size (session 78).
TEST(TrainerConfig, ExpertAxisNotDividingTheExpertsNamesNumExpertPartitions) {
  auto b = tiny_bindings(temp_dir("expert_axis"), 1);
  b.push_back("NUM_EXPERT_PARTITIONS = 8");
  const TrainRunConfig c =
      read_train_config(tiny_config(b, "configs/runs/moe/pretrain.gin", "configs/models/moe/tiny.gin"), false);
  PartitionOptions po;
  po.processes = 8;
  try {
    partition_report(c, po);
    ADD_FAILURE() << "4 experts split 8 ways";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dim 0 'expert' of size 4 is not divisible by 8"), std::string::npos) << m;
    EXPECT_NE(m.find("hint: a dim that logical_axis_rules split over a mesh axis must be a multiple of the axis' "
                     "size: choose NUM_EXPERT_PARTITIONS"),
              std::string::npos)
        << m;
  }
}

// A literal logical_axis_rules list is the rules (t5x takes one as well),
// and standard_logical_axis_rules' additional_rules follow its preset (both
// were read as the default preset, session 78); a mesh axis the mesh lacks is
// named.
TEST(TrainerConfig, LiteralLogicalAxisRulesAndAdditionalRules) {
  const std::string dir = temp_dir("cfg_rules");
  auto with = [&](const std::string& binding) {
    auto b = tiny_bindings(dir, 4);
    b.push_back(binding);
    return read_train_config(tiny_config(b)).partitioner;
  };
  const PartitionerConfig lit =
      with("partitioning.PjitPartitioner.logical_axis_rules = [('batch', 'data'), ('vocab', None), "
           "('mlp', ('data', 'model')), ('heads', 'model')]");
  EXPECT_EQ(logical_axis_rules(lit), (LogicalAxisRules{{"batch", {"data"}}, {"vocab", {}},
                                                        {"mlp", {"data", "model"}}, {"heads", {"model"}}}));
  EXPECT_TRUE(logical_axis_rules(with("partitioning.PjitPartitioner.logical_axis_rules = []")).empty());
  const PartitionerConfig add =
      with("partitioning.standard_logical_axis_rules.additional_rules = [('my_axis', 'model')]");
  EXPECT_EQ(logical_axis_rules(add), standard_logical_axis_rules(1, 1, {{"my_axis", {"model"}}}));
  EXPECT_EQ(logical_axis_rules(add).back(), (AxisRule{"my_axis", {"model"}}));
  expect_refused(dir, {"partitioning.PjitPartitioner.logical_axis_rules = [('batch', 'bogus')]"},
                 "rule 'batch' names mesh axis 'bogus', which the mesh does not have");
}

TEST(TrainerConfig, AdamWSettingsThatAreNotNumbersAreNamed) {
  const std::string dir = temp_dir("cfg_adamw_nan");
  for (const auto& [binding, message] : std::vector<std::pair<std::string, std::string>>{
           {"optax.adamw.b2 = nan", "b1 and b2 must be in [0, 1), got b1 = 0.900000, b2 = nan"},
           {"optax.adamw.weight_decay = nan", "weight_decay must be finite, got nan"},
           {"optax.adamw.eps = -1.0", "eps and eps_root must be finite and >= 0"},
           {"optax.adamw.learning_rate = nan", "optax.adamw.learning_rate = nan is not a finite number"}})
    expect_refused(dir,
                   {"OPTIMIZER = @optimizers.chain()", "optimizers.chain.transformations = [@optax.adamw()]",
                    "optax.adamw.learning_rate = 1e-3", binding},
                   message);
}

TEST(TrainerConfig, PretrainScheduleAndAdamW) {
  std::string dir = temp_dir("cfg2");
  auto b = tiny_bindings(dir, 4);
  b.resize(b.size() - 2);  // keep pretrain.gin's rsqrt schedule
  b.push_back("OPTIMIZER = @optimizers.chain()");
  b.push_back("optimizers.chain.transformations = [@optax.clip_by_global_norm(), @optax.adamw()]");
  b.push_back("optax.clip_by_global_norm.max_norm = 1.0");
  b.push_back("optax.adamw.learning_rate = @optax.warmup_cosine_decay_schedule()");
  b.push_back("optax.warmup_cosine_decay_schedule.init_value = 0.0");
  b.push_back("optax.warmup_cosine_decay_schedule.peak_value = 1e-3");
  b.push_back("optax.warmup_cosine_decay_schedule.warmup_steps = 10");
  b.push_back("optax.warmup_cosine_decay_schedule.decay_steps = 100");
  TrainRunConfig c = read_train_config(tiny_config(b));
  EXPECT_EQ(c.optimizer.optimizer->name(), "optimizers.adamw");
  EXPECT_NEAR(c.optimizer.schedule(5), 0.5e-3, 1e-12);
  EXPECT_NEAR(c.optimizer.schedule(10), 1e-3, 1e-12);
  // The Adafactor run: pretrain.gin's 'constant * rsqrt_decay', 1.0, warmup 10000.
  auto b2 = tiny_bindings(dir, 4);
  b2.resize(b2.size() - 2);
  TrainRunConfig c2 = read_train_config(tiny_config(b2));
  EXPECT_NEAR(c2.optimizer.schedule(0), 0.01, 1e-12);
  EXPECT_NEAR(c2.optimizer.schedule(40000), 0.005, 1e-12);
}

// optimizers.sgd (optax.sgd behind OptaxWrapper): momentum, nesterov, a
// constant or a scheduled rate; bad values are refused by parameter name.
TEST(TrainerConfig, SgdReadsMomentumNesterovAndTheRate) {
  const std::string dir = temp_dir("cfg_sgd");
  TrainRunConfig c = tiny_run(dir, 4, {"OPTIMIZER = @optimizers.sgd()", "optimizers.sgd.learning_rate = 0.1",
                                       "optimizers.sgd.momentum = 0.9", "optimizers.sgd.nesterov = True"});
  EXPECT_EQ(c.optimizer.optimizer->name(), "optimizers.sgd");
  const auto* sgd = dynamic_cast<const Sgd*>(c.optimizer.optimizer.get());
  ASSERT_NE(sgd, nullptr);
  ASSERT_TRUE(sgd->config().momentum.has_value());
  EXPECT_DOUBLE_EQ(*sgd->config().momentum, 0.9);
  EXPECT_TRUE(sgd->config().nesterov);
  EXPECT_FALSE(sgd->config().lr_is_schedule);  // a constant: no ScaleByScheduleState
  EXPECT_DOUBLE_EQ(c.optimizer.schedule(0), 0.1);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule(1000), 0.1);
  ParamTree p{{"w", Array::ones(Shape{{"embed", 3}})}};
  OptimizerState st = sgd->init(p);
  EXPECT_EQ(st.slots.size(), 1u);
  EXPECT_TRUE(st.slots.count("0/trace/w"));

  // Defaults (momentum None) with an optax schedule: no trace, a count.
  TrainRunConfig d = tiny_run(dir, 4, {"OPTIMIZER = @optimizers.sgd()",
                                       "optimizers.sgd.learning_rate = @optax.linear_schedule()",
                                       "optax.linear_schedule.init_value = 0.1", "optax.linear_schedule.end_value = 0.0",
                                       "optax.linear_schedule.transition_steps = 10"});
  const auto* plain = dynamic_cast<const Sgd*>(d.optimizer.optimizer.get());
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->config().momentum.has_value());
  EXPECT_FALSE(plain->config().nesterov);
  EXPECT_TRUE(plain->config().lr_is_schedule);
  EXPECT_NEAR(d.optimizer.schedule(5), 0.05, 1e-12);
  OptimizerState ps = plain->init(p);
  EXPECT_EQ(ps.slots.size(), 1u);
  EXPECT_TRUE(ps.slots.count("1/count"));

  auto gin_error = [&](const std::vector<std::string>& extra) {
    try {
      tiny_run(temp_dir("cfg_sgd_bad"), 2, extra);
    } catch (const gin::GinError& e) {
      return std::string(e.what());
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  const std::vector<std::string> base = {"OPTIMIZER = @optimizers.sgd()", "optimizers.sgd.learning_rate = 0.1"};
  auto with = [&](const std::string& b) {
    auto v = base;
    v.push_back(b);
    return v;
  };
  std::string m = gin_error(with("optimizers.sgd.momentum = 'x'"));
  EXPECT_NE(m.find("momentum"), std::string::npos) << m;
  m = gin_error(with("optimizers.sgd.momentum = nan"));
  EXPECT_NE(m.find("optimizers.sgd.momentum must be finite"), std::string::npos) << m;
  m = gin_error(with("optimizers.sgd.accumulator_dtype = 'bfloat16'"));
  EXPECT_NE(m.find("optimizers.sgd.accumulator_dtype = 'bfloat16' is not supported"), std::string::npos) << m;
  m = gin_error(with("optimizers.sgd.nesterov = 3"));
  EXPECT_NE(m.find("nesterov"), std::string::npos) << m;
  EXPECT_EQ(gin_error(with("optimizers.sgd.accumulator_dtype = 'float32'")), "<no error>");

  // optimizers.chain([clip_by_global_norm, sgd]): the clip is the SGD's, and
  // its state moves under "1/" as optax.chain nests it.
  TrainRunConfig ch = tiny_run(dir, 4, {"OPTIMIZER = @optimizers.chain()",
                                        "optimizers.chain.transformations = [@optax.clip_by_global_norm(), @optax.sgd()]",
                                        "optax.clip_by_global_norm.max_norm = 2.5", "optax.sgd.learning_rate = 0.1",
                                        "optax.sgd.momentum = 0.9"});
  const auto* clipped = dynamic_cast<const Sgd*>(ch.optimizer.optimizer.get());
  ASSERT_NE(clipped, nullptr);
  ASSERT_EQ(clipped->config().chain.size(), 1u);
  EXPECT_EQ(clipped->config().chain[0].kind, ChainedClip::Kind::kGlobalNorm);
  EXPECT_DOUBLE_EQ(clipped->config().chain[0].threshold, 2.5);
  EXPECT_DOUBLE_EQ(*clipped->config().momentum, 0.9);
  EXPECT_TRUE(clipped->init(p).slots.count("1/0/trace/w"));
  // A chain t5x.cpp does not run names the item and the form it takes.
  const std::string chain = "OPTIMIZER = @optimizers.chain()";
  m = gin_error({chain, "optimizers.chain.transformations = [@optax.sgd(), @optax.clip_by_global_norm()]",
                 "optax.sgd.learning_rate = 0.1", "optax.clip_by_global_norm.max_norm = 1.0"});
  EXPECT_NE(m.find("optimizers.chain.transformations[0] = @optax.sgd is an optimizer before the chain's end"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("hint: the optimizer is the last item, after the clips: [@optax.clip(), @optax.adamw()]"),
            std::string::npos)
      << m;
  m = gin_error({chain, "optimizers.chain.transformations = [@optax.clip(), @optax.adafactor()]"});
  EXPECT_NE(m.find("adafactor"), std::string::npos) << m;  // unknown to the registry: named
  m = gin_error({chain, "optimizers.chain.transformations = [@optax.clip_by_global_norm()]",
                 "optax.clip_by_global_norm.max_norm = 1.0"});
  EXPECT_NE(m.find("transformations[0] = @optax.clip_by_global_norm ends the chain, which has no optimizer"),
            std::string::npos)
      << m;
  m = gin_error({chain, "optimizers.chain.transformations = [@optax.clip(), @utils.DatasetConfig()]",
                 "optax.clip.max_delta = 1.0"});
  EXPECT_NE(m.find("transformations[1] = @utils.DatasetConfig is not supported there"), std::string::npos) << m;
  m = gin_error({chain, "optimizers.chain.transformations = [@a/optax.clip(), @optax.sgd()]",
                 "a/optax.clip.max_delta = -2.0", "optax.sgd.learning_rate = 0.1"});
  EXPECT_NE(m.find("transformations[0]: a/optax.clip.max_delta must be finite and > 0, got -2"), std::string::npos)
      << m;
  m = gin_error({"OPTIMIZER = @optimizers.adamw()"});
  EXPECT_NE(m.find("optimizers.adamw.learning_rate is not bound"), std::string::npos) << m;  // not the trainer's
  m = gin_error({"OPTIMIZER = @optimizers.lion()", "optimizers.lion.learning_rate = None"});
  EXPECT_NE(m.find("optimizers.lion.learning_rate is None"), std::string::npos) << m;
  m = gin_error({chain, "optimizers.chain.transformations = [1.0, @optax.sgd()]", "optax.sgd.learning_rate = 0.1"});
  EXPECT_NE(m.find("optimizers.chain.transformations[0] is 1.0, not a transformation"), std::string::npos) << m;
  m = gin_error({chain, "optimizers.chain.transformations = [@optax.clip_by_global_norm(), @optax.sgd()]",
                 "optax.clip_by_global_norm.max_norm = 0.0", "optax.sgd.learning_rate = 0.1"});
  EXPECT_NE(m.find("transformations[0]: optax.clip_by_global_norm.max_norm must be finite and > 0, got 0"), std::string::npos) << m;
}

TEST(Trainer, LossFallsOnGpl3Task) {
  std::string dir = temp_dir("falls");
  auto b = tiny_bindings(dir, 30);
  b.push_back("utils.SaveCheckpointConfig.period = 30");
  b.push_back("utils.create_learning_rate_scheduler.base_learning_rate = 0.1");
  gin::Config g = tiny_config(b);
  TrainerOptions o = fast();
  o.gin = &g;
  Trainer t(read_train_config(g), single(), o);
  TrainResult r = t.train();
  ASSERT_EQ(r.status, TrainResult::Status::kDone) << r.message;
  ASSERT_EQ(r.losses.size(), 30u);
  const double first = mean(r.losses, 0, 5), last = mean(r.losses, 25, 30);
  EXPECT_LT(last, 0.9 * first) << "first " << first << " last " << last;
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_EQ(t.state().step(), 30);
  // Outputs of a t5x run.
  EXPECT_TRUE(fs::exists(dir + "/config.gin"));
  EXPECT_TRUE(fs::exists(dir + "/model-info.txt"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint_0/checkpoint"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint_30/checkpoint"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint_30/train_ds-000-of-001.json"));
  EXPECT_TRUE(fs::exists(dir + "/training_eval/gpl3_lines_copy/metrics.jsonl"));
}

// Trains `steps` steps, optionally stopping after `stop` and resuming in a new Trainer.
TrainState run_maybe_interrupted(const std::string& dir, int steps, int stop, std::vector<double>* losses,
                                 const std::vector<std::string>& extra = {}) {
  if (stop > 0) {
    TrainerOptions o = fast();
    o.stop_after_step = stop;
    Trainer first(tiny_run(dir, steps, extra), single(), o);
    TrainResult r = first.train();
    EXPECT_EQ(r.status, TrainResult::Status::kStopped);
    losses->insert(losses->end(), r.losses.begin(), r.losses.end());
  }
  Trainer t(tiny_run(dir, steps, extra), single(), fast());
  TrainResult r = t.train();
  EXPECT_EQ(r.status, TrainResult::Status::kDone) << r.message;
  losses->insert(losses->end(), r.losses.begin(), r.losses.end());
  return t.state();
}

TEST(Trainer, KillAndResumeIsBitwiseEqual) {
  std::vector<double> la, lb;
  TrainState a = run_maybe_interrupted(temp_dir("uninterrupted"), 8, 0, &la);
  // Stopped after step 5: the newest checkpoint is step 4, so the resumed
  // run redoes step 5 from step 4's parameters and data position.
  TrainState b = run_maybe_interrupted(temp_dir("resumed"), 8, 5, &lb);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [k, v] : a.params) EXPECT_TRUE(array_equal(v, b.params.at(k))) << k;
  for (const auto& [k, v] : a.opt.slots) EXPECT_TRUE(array_equal(v, b.opt.slots.at(k))) << k;
  EXPECT_EQ(a.step(), 8);
  EXPECT_EQ(b.step(), 8);
  ASSERT_EQ(la.size(), 8u);
  ASSERT_EQ(lb.size(), 9u);  // 5 + (8 - 4)
  for (int i = 0; i < 4; ++i) EXPECT_EQ(la[4 + i], lb[5 + i]) << "step " << 5 + i;
  EXPECT_EQ(la[4], lb[4]);  // step 5 computed twice, identically
}

// optimizers.sgd with momentum and a schedule (state "0/trace/<path>" and
// "1/count"): a run stopped after step 3 resumes from checkpoint 2 and
// continues with the losses and state of the uninterrupted run.
TEST(Trainer, SgdMomentumKillAndResumeIsBitwiseEqual) {
  const std::vector<std::string> sgd = {"OPTIMIZER = @optimizers.sgd()",
                                        "optimizers.sgd.learning_rate = @utils.create_learning_rate_scheduler()",
                                        "optimizers.sgd.momentum = 0.9",
                                        // the loss is summed over tokens: a small rate
                                        "utils.create_learning_rate_scheduler.base_learning_rate = 3e-3"};
  std::vector<double> la, lb;
  TrainState a = run_maybe_interrupted(temp_dir("sgd_uninterrupted"), 6, 0, &la, sgd);
  TrainState b = run_maybe_interrupted(temp_dir("sgd_resumed"), 6, 3, &lb, sgd);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [k, v] : a.params) EXPECT_TRUE(array_equal(v, b.params.at(k))) << k;
  ASSERT_EQ(a.opt.slots.size(), a.params.size() + 1);  // one trace per param + the schedule's count
  for (const auto& [k, v] : a.opt.slots) EXPECT_TRUE(array_equal(v, b.opt.slots.at(k))) << k;
  for (const auto& [k, v] : a.params) {
    ASSERT_TRUE(a.opt.slots.count("0/trace/" + k)) << k;
    double most = 0;
    for (float x : a.opt.slots.at("0/trace/" + k).to_floats()) most = std::max(most, double(std::abs(x)));
    EXPECT_GT(most, 0.0) << k;  // the momentum moved
  }
  EXPECT_EQ(a.opt.slots.at("1/count").item(), 6);
  EXPECT_EQ(b.opt.slots.at("1/count").item(), 6);
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 7u);  // 3 + (6 - 2)
  for (int i = 0; i < 4; ++i) EXPECT_EQ(la[2 + i], lb[3 + i]) << "step " << 3 + i;
  EXPECT_EQ(la[2], lb[2]);  // step 3 computed twice, identically
  std::cout << "sgd + momentum losses: first " << la[0] << ", last " << la[5] << "\n";
  EXPECT_LT(la[5], 0.95 * la[0]);  // and it learns
}

// t5x's base_wmt_from_scratch_lion.gin recipe, chain([optax.clip(1.0),
// optax.lion(warmup_cosine_decay_schedule)]): Lion's state sits under "1/"
// ("1/0/count", "1/0/mu/<path>", "1/2/count"), a run stopped after step 3
// resumes from checkpoint 2 into the uninterrupted run's losses and state,
// and the loss falls.
TEST(Trainer, LionAfterClipKillAndResumeIsBitwiseEqual) {
  const std::vector<std::string> lion = {"OPTIMIZER = @optimizers.chain()",
                                         "optimizers.chain.transformations = [@optax.clip(), @optax.lion()]",
                                         "optax.clip.max_delta = 1.0",
                                         "optax.lion.learning_rate = @optax.warmup_cosine_decay_schedule()",
                                         "optax.warmup_cosine_decay_schedule.init_value = 0.0",
                                         "optax.warmup_cosine_decay_schedule.peak_value = 1e-2",
                                         "optax.warmup_cosine_decay_schedule.warmup_steps = 1",
                                         "optax.warmup_cosine_decay_schedule.decay_steps = 100"};
  std::vector<double> la, lb;
  TrainState a = run_maybe_interrupted(temp_dir("lion_uninterrupted"), 6, 0, &la, lion);
  TrainState b = run_maybe_interrupted(temp_dir("lion_resumed"), 6, 3, &lb, lion);
  ASSERT_EQ(a.opt.slots.size(), a.params.size() + 2);  // one mu per param + two counts
  for (const auto& [k, v] : a.params) {
    EXPECT_TRUE(array_equal(v, b.params.at(k))) << k;
    ASSERT_TRUE(a.opt.slots.count("1/0/mu/" + k)) << k;
  }
  for (const auto& [k, v] : a.opt.slots) EXPECT_TRUE(array_equal(v, b.opt.slots.at(k))) << k;
  EXPECT_EQ(a.opt.slots.at("1/0/count").item(), 6);
  EXPECT_EQ(b.opt.slots.at("1/2/count").item(), 6);
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 7u);  // 3 + (6 - 2)
  for (int i = 0; i < 4; ++i) EXPECT_EQ(la[2 + i], lb[3 + i]) << "step " << 3 + i;
  std::cout << "chain(clip, lion) losses: first " << la[0] << ", last " << la[5] << "\n";
  EXPECT_LT(la[5], 0.95 * la[0]);
}

// optimizers.lion and the chain's clips read from gin: defaults as optax,
// both clips in either order, and what t5x.cpp cannot run refused by name.
TEST(TrainerConfig, LionAndChainedClipsFromGin) {
  std::string dir = temp_dir("cfg_lion");
  const ParamTree p{{"w", Array::ones(Shape{{"embed", 3}})}};
  TrainRunConfig c = tiny_run(dir, 4, {"OPTIMIZER = @optimizers.lion()", "optimizers.lion.learning_rate = 1e-4"});
  const auto* plain = dynamic_cast<const Lion*>(c.optimizer.optimizer.get());
  ASSERT_NE(plain, nullptr);
  EXPECT_DOUBLE_EQ(plain->config().b1, 0.9);
  EXPECT_DOUBLE_EQ(plain->config().b2, 0.99);
  EXPECT_DOUBLE_EQ(plain->config().weight_decay, 1e-3);
  EXPECT_FALSE(plain->config().lr_is_schedule);
  EXPECT_TRUE(plain->config().chain.empty());
  EXPECT_NEAR(c.optimizer.schedule(7), 1e-4, 1e-18);
  const OptimizerState st = plain->init(p);
  EXPECT_EQ(st.slots.size(), 2u);
  EXPECT_TRUE(st.slots.count("0/count") && st.slots.count("0/mu/w"));

  TrainRunConfig d = tiny_run(dir, 4, {"OPTIMIZER = @optimizers.chain()",
                                       "optimizers.chain.transformations = "
                                       "[@optax.clip(), @optax.clip_by_global_norm(), @optax.lion()]",
                                       "optax.clip.max_delta = 0.5", "optax.clip_by_global_norm.max_norm = 2.0",
                                       "optax.lion.learning_rate = 1e-4", "optax.lion.mu_dtype = 'bfloat16'",
                                       "optax.lion.b1 = 0.95", "optax.lion.weight_decay = 0.0"});
  const auto* chained = dynamic_cast<const Lion*>(d.optimizer.optimizer.get());
  ASSERT_NE(chained, nullptr);
  ASSERT_EQ(chained->config().chain.size(), 2u);
  EXPECT_EQ(chained->config().chain[0].kind, ChainedClip::Kind::kValue);
  EXPECT_DOUBLE_EQ(chained->config().chain[0].threshold, 0.5);
  EXPECT_EQ(chained->config().chain[1].kind, ChainedClip::Kind::kGlobalNorm);
  EXPECT_DOUBLE_EQ(chained->config().chain[1].threshold, 2.0);
  EXPECT_EQ(chained->config().mu_dtype, DType::bf16);
  EXPECT_DOUBLE_EQ(chained->config().b1, 0.95);
  EXPECT_EQ(chained->init(p).slots.at("2/0/mu/w").dtype(), DType::bf16);
  // The startup line's account of it.
  EXPECT_EQ(d.optimizer.description,
            "optimizers.chain([optax.clip, optax.clip_by_global_norm, optax.lion]), learning rate 0.0001 (constant)");
  EXPECT_EQ(c.optimizer.description, "optimizers.lion, learning rate 0.0001 (constant)");

  // base_wmt_from_scratch_adamw.gin's chain: clip, then adamw.
  TrainRunConfig e = tiny_run(dir, 4, {"OPTIMIZER = @optimizers.chain()",
                                       "optimizers.chain.transformations = [@optax.clip(), @optax.adamw()]",
                                       "optax.clip.max_delta = 1.0", "optax.adamw.learning_rate = 1e-4"});
  const auto* adamw = dynamic_cast<const AdamW*>(e.optimizer.optimizer.get());
  ASSERT_NE(adamw, nullptr);
  ASSERT_EQ(adamw->config().chain.size(), 1u);
  EXPECT_EQ(adamw->config().chain[0].kind, ChainedClip::Kind::kValue);
  EXPECT_EQ(adamw->adam_prefix(), "1/0/");

  auto gin_error = [&](const std::vector<std::string>& extra) {
    try {
      tiny_run(temp_dir("cfg_lion_bad"), 2, extra);
    } catch (const gin::GinError& e) {
      return std::string(e.what());
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  const std::vector<std::string> base = {"OPTIMIZER = @optimizers.lion()", "optimizers.lion.learning_rate = 1e-4"};
  auto with = [&](const std::string& x) {
    auto v = base;
    v.push_back(x);
    return v;
  };
  std::string m = gin_error(with("optimizers.lion.mask = @optax.clip()"));
  EXPECT_NE(m.find("optimizers.lion.mask = @optax.clip() is not supported"), std::string::npos) << m;
  m = gin_error(with("optimizers.lion.weight_decay = @optax.linear_schedule()"));
  EXPECT_NE(m.find("optimizers.lion.weight_decay = @optax.linear_schedule() is a schedule"), std::string::npos) << m;
  m = gin_error(with("optimizers.lion.b2 = 1.5"));
  EXPECT_NE(m.find("optimizers.lion.b2 must be in [0, 1]"), std::string::npos) << m;
  m = gin_error({"OPTIMIZER = @optimizers.lion()", "optimizers.lion.learning_rate = @optax.warmup_cosine_decay_schedule()",
                 "optax.warmup_cosine_decay_schedule.init_value = 0.0",
                 "optax.warmup_cosine_decay_schedule.peak_value = 1e-4",
                 "optax.warmup_cosine_decay_schedule.warmup_steps = 1000",
                 "optax.warmup_cosine_decay_schedule.decay_steps = %TRAIN_STEPS"});
  EXPECT_NE(m.find("optax.warmup_cosine_decay_schedule.decay_steps = 2 must be larger than its warmup_steps = 1000"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--gin.LION_WARMUP_STEPS"), std::string::npos) << m;
  m = gin_error(with("optimizers.lion.mu_dtype = 'int8'"));
  EXPECT_NE(m.find("optimizers.lion.mu_dtype = 'int8' is not supported"), std::string::npos) << m;
  m = gin_error({"OPTIMIZER = @optimizers.chain()", "optimizers.chain.transformations = [@optax.clip(), @optax.lion()]",
                 "optax.clip.max_delta = 0.0", "optax.lion.learning_rate = 1e-4"});
  EXPECT_NE(m.find("optimizers.chain.transformations[0]: optax.clip.max_delta must be finite and > 0, got 0"),
            std::string::npos)
      << m;
  m = gin_error({"OPTIMIZER = @optimizers.chain()", "optimizers.chain.transformations = [@optax.lion(), @optax.clip()]",
                 "optax.clip.max_delta = 1.0", "optax.lion.learning_rate = 1e-4"});
  EXPECT_NE(m.find("optimizers.chain.transformations[0] = @optax.lion is an optimizer before the chain's end"),
            std::string::npos)
      << m;
}

// t5x contrib/moe's configs/runs/pretrain.gin binds
// train_script.train.trainer_cls = @moe_trainer.MoeTrainer: the run reads
// the rate and microbatches from it, its num_expert_partitions must be the
// partitioner's, and a differing binding left on the unused trainer.Trainer
// is refused rather than dropped.
TEST(TrainerConfig, MoeTrainerFromGin) {
  const std::string dir = temp_dir("cfg_moe_trainer");
  const std::vector<std::string> moe_trainer = {
      "from t5x.contrib.moe import trainer as moe_trainer",
      "train_script.train.trainer_cls = @moe_trainer.MoeTrainer()",
      "moe_trainer.MoeTrainer.num_microbatches = 2",
      "moe_trainer.MoeTrainer.learning_rate_fn = @moe/utils.create_learning_rate_scheduler()",
      "moe/utils.create_learning_rate_scheduler.factors = 'constant'",
      "moe/utils.create_learning_rate_scheduler.base_learning_rate = 0.25",
      "moe_trainer.MoeTrainer.num_expert_partitions = %NUM_EXPERT_PARTITIONS"};
  auto moe_run = [&](std::vector<std::string> extra) {
    auto b = tiny_bindings(dir, 4, "gpl3_prefix");
    for (auto& x : moe_trainer) b.push_back(x);
    for (auto& x : extra) b.push_back(x);
    return read_train_config(tiny_config(b, "configs/runs/moe/pretrain.gin", "configs/models/moe/tiny.gin"));
  };
  TrainRunConfig c = moe_run({});
  EXPECT_EQ(c.trainer_class, "trainer.MoeTrainer");
  EXPECT_EQ(c.optimizer.description, "adafactor.Adafactor, learning rate from trainer.MoeTrainer.learning_rate_fn");
  EXPECT_EQ(c.num_microbatches, 2);
  EXPECT_DOUBLE_EQ(c.optimizer.schedule(100), 0.25);
  EXPECT_TRUE(c.partitioner.moe());

  auto error = [&](std::vector<std::string> extra) {
    try {
      moe_run(std::move(extra));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  std::string m = error({"moe_trainer.MoeTrainer.num_expert_partitions = 3"});
  EXPECT_NE(m.find("trainer.MoeTrainer.num_expert_partitions = 3 but partitioning.MoePjitPartitioner."
                   "num_expert_partitions = "),
            std::string::npos)
      << m;
  m = error({"trainer.Trainer.num_microbatches = 4"});
  EXPECT_NE(m.find("trainer.Trainer.num_microbatches = 4 is not read: the run's trainer is trainer.MoeTrainer"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("hint: bind trainer.MoeTrainer.num_microbatches instead"), std::string::npos) << m;
  m = error({"train_script.train.trainer_cls = @utils.DatasetConfig()"});
  EXPECT_NE(m.find("train_script.train.trainer_cls = @utils.DatasetConfig() is not a trainer"), std::string::npos)
      << m;
  // MoeTrainer with the dense partitioner: no expert axis to match.
  auto b = tiny_bindings(dir, 4);
  for (auto& x : moe_trainer) b.push_back(x);
  b.push_back("NUM_EXPERT_PARTITIONS = 1");
  try {
    read_train_config(tiny_config(b));
    ADD_FAILURE() << "MoeTrainer under PjitPartitioner was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("but the partitioner (partitioning.PjitPartitioner) has no expert axis"),
              std::string::npos)
        << e.what();
  }
}

// A resume with another OPTIMIZER than the run's is an error naming both
// states' slots (it dropped the saved Adafactor state without a word: the
// bad-input sweep of session 59); the same optimizer resumes.
TEST(Trainer, ResumeWithAnotherOptimizerIsAnError) {
  const std::string dir = temp_dir("other_optimizer");
  Trainer a(tiny_run(dir, 2), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  Trainer b(tiny_run(dir, 4, {"OPTIMIZER = @optimizers.chain()", "optimizers.chain.transformations = [@optax.adamw()]",
                              "optax.adamw.learning_rate = 1e-3"}),
            single(), fast());
  try {
    b.initialize();
    FAIL() << "resumed with AdamW over Adafactor's state";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("holds the optimizer state of another optimizer"), std::string::npos) << m;
    EXPECT_NE(m.find("' is missing"), std::string::npos) << m;
    EXPECT_NE(m.find("hint: resume with the OPTIMIZER"), std::string::npos) << m;
  }
  Trainer c(tiny_run(dir, 3), single(), fast());
  c.initialize();
  EXPECT_EQ(c.state().step(), 2);

  // The same optimizer with other settings: Adafactor's slots keep their
  // names and change shape (unused ones are [1] zeros), which a resume met as
  // a bare shape error (found by an earlier bad-input probe). Now the slot,
  // both shapes and the settings to check are named. The run above factored
  // nothing (its dims are below min_dim_size_to_factor = 128) and kept no
  // momentum.
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"adafactor.Adafactor.beta1 = 0.9", "/m' is (1,) in the checkpoint but ("},
      {"adafactor.Adafactor.min_dim_size_to_factor = 8", " in the checkpoint but (1,) for this run's optimizer"},
  };
  for (const auto& [changed, slot] : changes) {
    Trainer d(tiny_run(dir, 4, {changed}), single(), fast());
    try {
      d.initialize();
      ADD_FAILURE() << "resumed with " << changed;
    } catch (const CheckpointError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("optimizer slot 'state/param_states/"), std::string::npos) << changed << ": " << m;
      EXPECT_NE(m.find(slot), std::string::npos) << changed << ": " << m;
      EXPECT_NE(m.find("hint: resume with the optimizer settings the run was trained with (Adafactor: factored, "
                       "min_dim_size_to_factor, beta1, factor_map)"),
                std::string::npos)
          << changed << ": " << m;
    }
  }
  EXPECT_EQ(Trainer(tiny_run(dir, 4, {"adafactor.Adafactor.factored = False"}), single(), fast()).train().status,
            TrainResult::Status::kDone);  // nothing was factored, so nothing changes

  // Lion's slots ("0/count", "0/mu/<path>") are among AdamW's: a resume
  // under Lion would drop "0/nu/..." and read AdamW's mu as its momentum
  // (the bad-input probe of session 68); SGD without momentum has no slots.
  const std::string d2 = temp_dir("adamw_then_lion");
  Trainer w(tiny_run(d2, 2, {"OPTIMIZER = @optimizers.adamw()", "optimizers.adamw.learning_rate = 1e-3"}), single(),
            fast());
  ASSERT_EQ(w.train().status, TrainResult::Status::kDone);
  for (const auto& other : std::vector<std::vector<std::string>>{
           {"OPTIMIZER = @optimizers.lion()", "optimizers.lion.learning_rate = 1e-4"},
           {"OPTIMIZER = @optimizers.sgd()", "optimizers.sgd.learning_rate = 0.1"}}) {
    Trainer l(tiny_run(d2, 4, other), single(), fast());
    try {
      l.initialize();
      ADD_FAILURE() << "resumed with " << other[0] << " over AdamW's state";
    } catch (const CheckpointError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("holds optimizer state this OPTIMIZER does not have (e.g. '0/"), std::string::npos) << m;
      EXPECT_NE(m.find("hint: resume with the OPTIMIZER"), std::string::npos) << m;
    }
  }
}

// A resume into a smaller model (a layer fewer) is an error under t5x's
// strict restore: it dropped the checkpoint's extra layer without a word (the
// bad-input sweep of session 67). strict = False drops it with a warning.
TEST(Trainer, ResumeIntoASmallerModelIsAnErrorUnderStrict) {
  const std::string dir = temp_dir("smaller_model");
  Trainer a(tiny_run(dir, 2), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  const std::string fewer = "network.T5Config.num_encoder_layers = 1";
  Trainer b(tiny_run(dir, 3, {fewer}), single(), fast());
  try {
    b.initialize();
    FAIL() << "resumed a 2-layer encoder's checkpoint into a 1-layer encoder";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("parameter(s) this model does not have (e.g. 'encoder/layers_1/"), std::string::npos) << m;
    EXPECT_NE(m.find("utils.RestoreCheckpointConfig.strict = False"), std::string::npos) << m;
  }
  std::ostringstream log;
  TrainerOptions o = fast();
  o.log = &log;
  Trainer c(tiny_run(dir, 3, {fewer, "utils.RestoreCheckpointConfig.strict = False"}), single(), o);
  c.initialize();
  EXPECT_EQ(c.state().step(), 2);
  EXPECT_NE(log.str().find("are not in this model (e.g. 'encoder/layers_1/"), std::string::npos) << log.str();
  for (const auto& [k, v] : c.state().params) EXPECT_TRUE(array_equal(v, a.state().params.at(k))) << k;
}

// A checkpoint whose step is not the one of its name (renamed, or its
// msgpack altered where no manifest guards it) is not resumed (it would skip
// or repeat steps): the scan moves it aside like a damaged one and the run
// resumes from the step before, and `ckpt info` reports it.
TEST(Trainer, ResumeSkipsACheckpointWhoseStepIsNotItsName) {
  const std::string dir = temp_dir("renamed_step");
  Trainer a(tiny_run(dir, 2), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  ASSERT_TRUE(std::filesystem::exists(checkpoint_dir_for_step(dir, 0)));
  std::filesystem::remove(checkpoint_dir_for_step(dir, 2) + "/" + kManifestFile);
  std::filesystem::rename(checkpoint_dir_for_step(dir, 2), checkpoint_dir_for_step(dir, 3));
  EXPECT_EQ(validate_checkpoint(checkpoint_dir_for_step(dir, 3)),
            checkpoint_dir_for_step(dir, 3) + " holds step 2, not the step of its name");
  Trainer b(tiny_run(dir, 4), single(), fast());
  b.initialize();
  EXPECT_EQ(b.state().step(), 0);
  EXPECT_FALSE(std::filesystem::exists(checkpoint_dir_for_step(dir, 3)));
  int moved = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    moved += e.path().filename().string().rfind("checkpoint_3.damaged-", 0) == 0;
  EXPECT_EQ(moved, 1);
}

// Without a manifest (a t5x checkpoint) a gzip chunk whose bytes changed but
// not its size stopped the resume on the chunk ("corrupt gzip/zlib chunk"):
// the scan checks the chunks' own CRC-32s, so the step is moved aside and the
// run resumes from the one before.
TEST(Trainer, ResumeFallsBackOverACorruptChunkWithoutManifest) {
  const std::string dir = temp_dir("corrupt_chunk");
  Trainer a(tiny_run(dir, 2), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  const std::string d2 = checkpoint_dir_for_step(dir, 2);
  std::filesystem::remove(d2 + "/" + kManifestFile);
  const std::string chunk = d2 + "/target.encoder.layers_0.mlp.wi_0.kernel/0.0";
  std::string bytes;
  {
    std::ifstream in(chunk, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 40u);
  bytes[bytes.size() / 2] ^= 0x20;  // inside the deflate stream; the size and the trailer stay
  std::ofstream(chunk, std::ios::binary | std::ios::trunc) << bytes;
  Trainer b(tiny_run(dir, 3), single(), fast());
  b.initialize();
  EXPECT_EQ(b.state().step(), 0);
  EXPECT_FALSE(std::filesystem::exists(d2));
}

// A regular file named checkpoint_2 in MODEL_DIR made step 2's save a silent
// no-op (taken as saved; bad-input sweep): it is moved aside like a damaged
// checkpoint, and step 2 is saved.
TEST(Trainer, AFileNamedLikeAStepIsMovedAsideAndTheStepSaved) {
  const std::string dir = temp_dir("file_named_step");
  std::ofstream(dir + "/checkpoint_2") << "";
  Trainer a(tiny_run(dir, 2), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  EXPECT_TRUE(std::filesystem::is_directory(checkpoint_dir_for_step(dir, 2)));
  EXPECT_EQ(validate_checkpoint(checkpoint_dir_for_step(dir, 2)), std::nullopt);
  int moved = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    moved += e.path().filename().string().rfind("checkpoint_2.damaged-", 0) == 0 && e.is_regular_file();
  EXPECT_EQ(moved, 1);
}

TEST(Trainer, ADamagedCheckpointNamedOutrightIsRefused) {
  const std::string pre = temp_dir("damaged_named");
  Trainer a(tiny_run(pre, 2), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  const std::string ckpt = checkpoint_dir_for_step(pre, 2);
  const std::string chunk = ckpt + "/target.decoder.decoder_norm.scale/0";
  ASSERT_TRUE(std::filesystem::exists(chunk));
  std::filesystem::remove(chunk);  // zarr would read it as fill values
  Trainer b(tiny_run(temp_dir("damaged_named_ft"), 3,
                     {"utils.RestoreCheckpointConfig.path = '" + ckpt + "'",
                      "utils.RestoreCheckpointConfig.mode = 'specific'"}),
            single(), fast());
  try {
    b.initialize();
    FAIL() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(chunk + " is missing (listed in manifest.t5xcpp.json)"), std::string::npos) << what;
    EXPECT_NE(what.find("t5x ckpt info " + ckpt), std::string::npos) << what;
  }
  // Named by its model directory, the newest valid step (0) is restored.
  Trainer c(tiny_run(temp_dir("damaged_latest_ft"), 3,
                     {"utils.RestoreCheckpointConfig.path = '" + pre + "'",
                      "utils.RestoreCheckpointConfig.mode = 'latest'"}),
            single(), fast());
  c.initialize();
  EXPECT_EQ(c.state().step(), 0);
}

TEST(Trainer, ParametersBeyondTheMachinesMemoryAreRefusedBeforeAllocating) {
  nn::ParamSpecs specs = {{"a/kernel", Shape{{"embed", 8}, {"mlp", 16}}, nn::InitSpec::normal(1.0)}};
  EXPECT_NO_THROW(check_param_memory(specs, 1));
  specs.push_back({"encoder/relpos_bias/rel_embedding", Shape{{"heads", int64_t(1) << 40}, {"relpos_buckets", 32}},
                   nn::InitSpec::normal(1.0)});
  try {
    check_param_memory(specs, 1);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exceed this machine's memory"), std::string::npos) << what;
    EXPECT_NE(what.find("the largest is encoder/relpos_bias/rel_embedding"), std::string::npos) << what;
    EXPECT_NE(what.find("network.T5Config.num_heads"), std::string::npos) << what;
  }
  // Split over enough processes it may fit (each holds a shard).
  EXPECT_NO_THROW(check_param_memory(specs, 1 << 30));
}

TEST(Trainer, NonFiniteLossStopsAndKeepsLastGoodCheckpoint) {
  std::string dir = temp_dir("nan");
  Trainer t(tiny_run(dir, 6, {"utils.create_learning_rate_scheduler.base_learning_rate = 1e30",
                              "utils.SaveCheckpointConfig.period = 1",
                              "adafactor.Adafactor.clipping_threshold = None",
                              "adafactor.Adafactor.multiply_by_parameter_scale = False"}),
            single(), fast());
  TrainResult r = t.train();
  ASSERT_EQ(r.status, TrainResult::Status::kNonFinite);
  EXPECT_NE(r.message.find("non-finite"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("last good checkpoint"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("hint: lower the learning rate, enable clipping"), std::string::npos) << r.message;
  auto latest = latest_step(dir);
  ASSERT_TRUE(latest);
  EXPECT_EQ(*latest, r.step);  // nothing saved after the last finite step
  // The kept checkpoint holds finite parameters.
  TrainState s = t.state();
  restore_train_state(checkpoint_dir_for_step(dir, *latest), s, true, "", 0, 1);
  EXPECT_TRUE(all_finite(s.params));
}

// SGD's hint is the rate first, which applies to the loss summed over the
// target tokens, then clipping through optimizers.chain.
TEST(Trainer, NonFiniteLossUnderSgdHintsTheRate) {
  Trainer t(tiny_run(temp_dir("nan_sgd"), 6,
                     {"OPTIMIZER = @optimizers.sgd()", "optimizers.sgd.learning_rate = 1e30",
                      "optimizers.sgd.momentum = 0.9"}),
            single(), fast());
  TrainResult r = t.train();
  ASSERT_EQ(r.status, TrainResult::Status::kNonFinite);
  EXPECT_NE(r.message.find("hint: lower the learning rate (SGD's applies to the loss summed over the batch's "
                           "target tokens"),
            std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("[@optax.clip_by_global_norm(), @optax.sgd()]"), std::string::npos) << r.message;
}

// t5x fine-tuning from the parameters alone: assignment_map skips the step
// and the optimizer statistics, which keep their fresh values.
TEST(Trainer, AssignmentMapRestoresParametersOnly) {
  std::string pre = temp_dir("amap_pre");
  Trainer a(tiny_run(pre, 3, {"utils.SaveCheckpointConfig.period = 3"}), single(), fast());
  ASSERT_EQ(a.train().status, TrainResult::Status::kDone);
  const std::string ckpt = checkpoint_dir_for_step(pre, 3);
  const std::string path = "utils.RestoreCheckpointConfig.path = '" + ckpt + "'";

  // Parameters only: step 0, fresh Adafactor slots, pretrained parameters.
  Trainer b(tiny_run(temp_dir("amap_ft"), 2,
                     {path, "utils.RestoreCheckpointConfig.mode = 'specific'",
                      "utils.RestoreCheckpointConfig.assignment_map = "
                      "((r'state/param_states/.*', None), (r'state/step', None))",
                      "utils.RestoreCheckpointConfig.strict = False"}),
            single(), fast());
  b.initialize();
  EXPECT_EQ(b.state().step(), 0);
  for (const auto& [k, v] : a.state().params) EXPECT_TRUE(array_equal(v, b.state().params.at(k))) << k;
  Trainer fresh(tiny_run(temp_dir("amap_fresh"), 2), single(), fast());
  fresh.initialize();
  size_t nonzero_pre = 0;
  for (const auto& [k, v] : b.state().opt.slots) {
    EXPECT_TRUE(array_equal(v, fresh.state().opt.slots.at(k))) << k;
    if (!array_equal(a.state().opt.slots.at(k), fresh.state().opt.slots.at(k))) ++nonzero_pre;
  }
  EXPECT_GT(nonzero_pre, 0u);  // the pretraining's statistics did differ from fresh ones
  ASSERT_EQ(b.train().status, TrainResult::Status::kDone);
  EXPECT_EQ(b.state().step(), 2);

  // The default restores everything; strict refuses unused leaves.
  Trainer c(tiny_run(temp_dir("amap_all"), 4, {path, "utils.RestoreCheckpointConfig.mode = 'specific'"}), single(),
            fast());
  c.initialize();
  EXPECT_EQ(c.state().step(), 3);
  for (const auto& [k, v] : a.state().opt.slots) EXPECT_TRUE(array_equal(v, c.state().opt.slots.at(k))) << k;
  Trainer d(tiny_run(temp_dir("amap_strict"), 2,
                     {path, "utils.RestoreCheckpointConfig.assignment_map = ((r'state/step', None),)"}),
            single(), fast());
  try {
    d.initialize();
    FAIL() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("state/step is not used"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("assignment_map"), std::string::npos) << e.what();
  }
  // A malformed rule names the gin binding.
  EXPECT_THROW(tiny_run(temp_dir("amap_bad"), 2, {"utils.RestoreCheckpointConfig.assignment_map = (('x', 1),)"}),
               gin::GinError);
}

TEST(Trainer, SummariesReadBackFromEventFilesAndJsonl) {
  std::string dir = temp_dir("tb");
  Trainer t(tiny_run(dir, 4), single(), fast());
  TrainResult r = t.train();
  ASSERT_EQ(r.status, TrainResult::Status::kDone);
  std::map<int64_t, float> tb_loss;
  std::set<std::string> tags;
  for (const auto& e : fs::directory_iterator(dir + "/train")) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    for (const auto& rec : read_tfrecords(e.path().string())) {
      ParsedEvent ev = parse_event(rec);
      for (const auto& [tag, v] : ev.scalars) {
        tags.insert(tag);
        if (tag == "loss") tb_loss[ev.step] = v;
      }
    }
  }
  ASSERT_EQ(tb_loss.size(), 4u);  // stats_period = 1
  for (int s = 1; s <= 4; ++s) EXPECT_FLOAT_EQ(tb_loss[s], float(r.losses[s - 1])) << s;
  for (const char* tag : {"accuracy", "learning_rate", "timing/seqs_per_second", "timing/target_tokens_per_second",
                          "loss_per_all_target_tokens", "z_loss"})
    EXPECT_TRUE(tags.count(tag)) << tag;
  std::ifstream jl(dir + "/train/metrics.jsonl");
  int n = 0;
  for (std::string line; std::getline(jl, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    const double want = r.losses[j["step"].get<int64_t>() - 1];
    EXPECT_NEAR(j["loss"].get<double>(), want, 1e-6 * std::abs(want));
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(Trainer, MicrobatchesGiveTheFullBatchLosses) {
  // Same batches; 4 microbatches sum to the full-batch gradient, so the
  // losses agree up to float summation order (Adafactor's first update is
  // nearly sign(g), so parameters are compared through the losses).
  std::string d1 = temp_dir("mb1"), d2 = temp_dir("mb2");
  Trainer a(tiny_run(d1, 3), single(), fast());
  Trainer b(tiny_run(d2, 3, {"trainer.Trainer.num_microbatches = 4"}), single(), fast());
  TrainResult ra = a.train(), rb = b.train();
  ASSERT_EQ(ra.losses.size(), 3u);
  ASSERT_EQ(rb.losses.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(ra.losses[i], rb.losses[i], 1e-4 * std::abs(ra.losses[i])) << "step " << i + 1;
  // A normalized loss divides by the whole batch's factor, not each
  // microbatch's own: microbatching stays a memory knob.
  const std::string norm = "LOSS_NORMALIZING_FACTOR = 'NUM_REAL_TARGET_TOKENS'";
  Trainer c(tiny_run(temp_dir("mb3"), 3, {norm}), single(), fast());
  Trainer d(tiny_run(temp_dir("mb4"), 3, {norm, "trainer.Trainer.num_microbatches = 4"}), single(), fast());
  TrainResult rc = c.train(), rd = d.train();
  ASSERT_EQ(rd.losses.size(), 3u);
  EXPECT_LT(rc.losses[0], 20.0);  // per token, not a sum
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(rc.losses[i], rd.losses[i], 1e-4 * std::abs(rc.losses[i])) << "step " << i + 1;
}

// A batch that the microbatches do not divide fails at start-up with the
// user's numbers, before anything lands in MODEL_DIR; a None where the
// partitioner wants True/False is a gin error at its binding.
TEST(Trainer, BadMicrobatchesAndMeshInvariantFailBeforeWriting) {
  const std::string dir = temp_dir("mb_bad");
  Trainer t(tiny_run(dir, 2, {"trainer.Trainer.num_microbatches = 3"}), single(), fast());
  try {
    t.train();
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("BATCH_SIZE = 8 is not divisible by trainer.Trainer.num_microbatches = 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir + "/config.gin"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoint_0"));
  try {
    tiny_run(temp_dir("inv_none"), 2, {"partitioning.PjitPartitioner.mesh_invariant = None"});
    FAIL() << "expected a gin error";
  } catch (const gin::GinError& e) {
    EXPECT_NE(std::string(e.what()).find("mesh_invariant is None"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("write True"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tiny_run(temp_dir("np0"), 2, {"partitioning.PjitPartitioner.num_partitions = 0"}), gin::GinError);
}

// Nonsense steps and feature lengths fail when the config is read, before a
// model is built or anything is written (issue 22, findings 7 and 9).
TEST(Trainer, NegativeStepsAndEmptyFeatureLengthsFailAtRead) {
  const auto message_of = read_error;
  EXPECT_EQ(message_of({"TRAIN_STEPS = -1"}),
            "[trainer] train_script.train.total_steps (TRAIN_STEPS) must be in [0, 2^31 - 1], got -1 (a checkpoint's "
            "step is int32)");
  EXPECT_EQ(message_of({"TASK_FEATURE_LENGTHS = {'inputs': 0, 'targets': 24}"}),
            "[trainer] utils.DatasetConfig.task_feature_lengths['inputs'] must be in [1, 1048576], got 0 "
            "(TASK_FEATURE_LENGTHS)");
  EXPECT_EQ(message_of({"TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': -3}"}),
            "[trainer] utils.DatasetConfig.task_feature_lengths['targets'] must be in [1, 1048576], got -3 "
            "(TASK_FEATURE_LENGTHS)");
}

// TRAIN_STEPS below the restored step trains nothing, as in t5x, and says so.
TEST(Trainer, StepsBelowTheRestoredStepWarn) {
  const std::string dir = temp_dir("steps_below");
  {
    Trainer t(tiny_run(dir, 3), single(), fast());
    t.train();
  }
  std::ostringstream log;
  TrainerOptions o = fast();
  o.log = &log;
  Trainer t(tiny_run(dir, 1), single(), o);
  t.train();
  EXPECT_NE(log.str().find("warning: TRAIN_STEPS = 1 is below the restored step 3: no step is trained"),
            std::string::npos)
      << log.str();
  EXPECT_FALSE(fs::exists(dir + "/checkpoint_1"));
}

// Issue 22 (3): USE_CACHED_TASKS = True read no cache ("no completed cache
// under []" even after `seqio cache`). The cache directory now comes from
// seqio.add_global_cache_dirs.global_cache_dirs (or t5x's
// --seqio_additional_cache_dirs), and the cached examples train exactly as
// the on-the-fly ones.
TEST(Trainer, UseCachedTasksReadsTheSeqioCache) {
  seqio::register_builtin_tasks();
  const std::string cache = temp_dir("seqio_cache");
  seqio::write_cache(*seqio::TaskRegistry::get("gpl3_prefix"), cache, {});
  const std::vector<std::string> common = {"MIXTURE_OR_TASK_NAME = 'gpl3_prefix'", "SHUFFLE_TRAIN_EXAMPLES = False"};
  auto run = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    Trainer t(tiny_run(temp_dir(name), 2, extra), single(), fast());
    TrainResult r = t.train();
    EXPECT_EQ(r.status, TrainResult::Status::kDone) << r.message;
    return r.losses;
  };
  try {
    run("cached_nodir", {"USE_CACHED_TASKS = True"});
    ADD_FAILURE() << "no error without a cache directory";
  } catch (const seqio::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("task 'gpl3_prefix': no completed cache under []"), std::string::npos)
        << e.what();
  }
  auto cached = run("cached", {"USE_CACHED_TASKS = True", "seqio.add_global_cache_dirs.global_cache_dirs = ['" + cache + "']"});
  auto fly = run("on_the_fly", {});
  ASSERT_EQ(cached.size(), 2u);
  EXPECT_EQ(cached, fly);
  // A task without a cache step is read from its source, with seqio's warning.
  DatasetConfig mix;
  mix.mixture_or_task_name = "gpl3_mix";
  mix.use_cached = true;
  auto w = use_cached_warnings(mix);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("task 'gpl3_lines_copy' has no cache step"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("USE_CACHED_TASKS = False"), std::string::npos) << w[0];
  mix.use_cached = false;
  EXPECT_TRUE(use_cached_warnings(mix).empty());
}

// Issue 22 (4): a kill during the final evaluation (checkpoint_N written,
// evaluation not finished) used to leave it undone: the rerun printed
// "done at step N, loss 0.000000" and never evaluated.
TEST(Trainer, RerunAfterAKillDuringTheFinalEvalEvaluates) {
  const std::string dir = temp_dir("final_eval");
  const std::string metrics = dir + "/training_eval/gpl3_lines_copy/metrics.jsonl";
  {
    Trainer t(tiny_run(dir, 2), single(), fast());
    ASSERT_EQ(t.train().status, TrainResult::Status::kDone);
  }
  ASSERT_TRUE(fs::exists(metrics));
  EXPECT_EQ(last_evaluated_step(dir), std::optional<int64_t>(2));
  // What a kill during that evaluation leaves behind.
  fs::remove(dir + "/eval_completed.json");
  fs::remove_all(dir + "/training_eval");
  auto rerun = [&] {
    std::ostringstream log;
    TrainerOptions o = fast();
    o.log = &log;
    Trainer t(tiny_run(dir, 2), single(), o);
    TrainResult r = t.train();
    EXPECT_EQ(r.status, TrainResult::Status::kDone) << r.message;
    EXPECT_TRUE(r.losses.empty());
    return log.str();
  };
  std::string log = rerun();
  ASSERT_TRUE(fs::exists(metrics)) << log;
  std::ifstream f(metrics);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  EXPECT_EQ(nlohmann::json::parse(line)["step"], 2);
  EXPECT_TRUE(nlohmann::json::parse(line).contains("loss"));
  EXPECT_EQ(last_evaluated_step(dir), std::optional<int64_t>(2));
  EXPECT_NE(log.find("the final evaluation at step 2 did not finish; running it"), std::string::npos) << log;
  EXPECT_NE(log.find("done at step 2 (no step trained)"), std::string::npos) << log;
  EXPECT_EQ(log.find("loss 0.000000"), std::string::npos) << log;
  // Once it finished, a rerun does not evaluate again.
  fs::remove_all(dir + "/training_eval");
  log = rerun();
  EXPECT_FALSE(fs::exists(metrics)) << log;
}

// Issue 22 (6): SENTENCEPIECE_MODEL_FILE pointing nowhere was ignored (the
// tasks bring their own vocabulary). As in t5x, the model's vocabulary must be
// the task's: a missing file or another vocabulary fails at read.
TEST(TrainerConfig, SentencePieceModelFileMustExistAndBeTheTaskVocabulary) {
  const auto message_of = read_error;
  const std::string missing =
      "[trainer] seqio.SentencePieceVocabulary.sentencepiece_model_file (SENTENCEPIECE_MODEL_FILE) = "
      "'/nonexistent/spm.model': no such file\n  hint: point SENTENCEPIECE_MODEL_FILE at";
  EXPECT_EQ(message_of({"SENTENCEPIECE_MODEL_FILE = '/nonexistent/spm.model'"}).substr(0, missing.size()), missing);
  // gpl3_lines_copy: tests/golden/seqio/vocab/spm1000.model with 100 extra ids.
  const std::string spm = "tests/golden/seqio/vocab/spm1000.model";
  const std::string copy = temp_dir("spm_copy") + "/spm.model";
  fs::copy_file(spm, copy);
  EXPECT_EQ(message_of({"SENTENCEPIECE_MODEL_FILE = '" + copy + "'", "seqio.SentencePieceVocabulary.extra_ids = 100"}),
            "<no error>");
  TrainRunConfig ok = tiny_run(temp_dir("spm_ok"), 2,
                               {"SENTENCEPIECE_MODEL_FILE = '" + spm + "'", "seqio.SentencePieceVocabulary.extra_ids = 100"});
  EXPECT_EQ(ok.model.vocabulary_file, spm);
  EXPECT_EQ(ok.model.vocabulary_extra_ids, 100);
  const std::string mismatch = "[trainer] Model and Task vocabularies do not match: task 'gpl3_lines_copy'";
  EXPECT_EQ(message_of({"SENTENCEPIECE_MODEL_FILE = '" + spm + "'"}).substr(0, mismatch.size()), mismatch);
  std::ofstream(copy, std::ios::app) << "x";  // another model file
  EXPECT_EQ(message_of({"SENTENCEPIECE_MODEL_FILE = '" + copy + "'", "seqio.SentencePieceVocabulary.extra_ids = 100"})
                .substr(0, mismatch.size()),
            mismatch);
  // infer (and eval) make the same check.
  try {
    read_infer_config(tiny_config({"MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'", "CHECKPOINT_PATH = 'unused'",
                                   "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}", "INFER_OUTPUT_DIR = 'unused'",
                                   "SENTENCEPIECE_MODEL_FILE = '/nonexistent/spm.model'"},
                                  "configs/runs/infer.gin"));
    ADD_FAILURE() << "infer read a missing SENTENCEPIECE_MODEL_FILE";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, missing.size()), missing);
  }
  // base.gin's public T5 vocabulary (gs://) cannot be read here: said, not checked.
  TrainRunConfig remote = tiny_run(temp_dir("spm_remote"), 2);
  auto w = check_model_vocabulary(remote.model, remote.train_ds);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("is a remote path, which is not read here"), std::string::npos) << *w;
}

// The console line shows t5x's loss (a token sum, t5x#1093) and next to it
// loss_per_nonpadding_target_token: that value is the printed loss divided by
// the non-padding target tokens of the step's batch (counted here from the
// same batches, read again). The final inference evaluation prints progress.
// Each console line of a `steps`-step run of `cfg` against its batches.
void expect_per_token_loss_lines(const TrainRunConfig& cfg, const std::string& text, int steps) {
  TrainData data(cfg.train_ds, cfg.model, *cfg.train_ds.seed, 0, 1);
  for (int s = 1; s <= steps; ++s) {
    const std::string head = "step " + std::to_string(s) + "/" + std::to_string(steps) + "  loss ";
    const size_t at = text.find(head);
    ASSERT_NE(at, std::string::npos) << text;
    std::istringstream line(text.substr(at + head.size()));
    double loss = 0, per_token = 0;
    std::string name;
    line >> loss >> name >> per_token;
    ASSERT_EQ(name, "loss_per_nonpadding_target_token") << text;
    Batch batch = data.next();
    const Array& targets = batch.at("decoder_target_tokens");
    double nonpad = 0;
    for (double w : batch.at("decoder_loss_weights").to_floats()) nonpad += w;
    ASSERT_GT(nonpad, 0);
    ASSERT_LT(nonpad, double(targets.size())) << "the batch has padding, so the two denominators differ";
    EXPECT_NEAR(per_token, loss / nonpad, 1e-4) << "step " << s << ": " << nonpad << " tokens\n" << text;
    EXPECT_GT(std::fabs(per_token - loss / double(targets.size())), 1e-3) << "step " << s;
    EXPECT_GT(loss, 10 * per_token);  // the sum, not a mean
  }
}

TEST(Trainer, ConsoleShowsPerTokenLossAndInferenceEvalProgress) {
  const std::string dir = temp_dir("console");
  const int steps = 3;
  auto b = tiny_bindings(dir, steps);
  for (const std::string& x : testing::infer_eval_bindings()) b.push_back(x);
  const TrainRunConfig cfg = read_train_config(tiny_config(b));
  ASSERT_TRUE(cfg.infer_eval_ds);
  std::ostringstream log;
  TrainerOptions o = fast();
  o.log = &log;
  Trainer t(cfg, single(), o);
  ASSERT_EQ(t.train().status, TrainResult::Status::kDone);
  const std::string text = log.str();
  expect_per_token_loss_lines(cfg, text, steps);
  // 20 validation examples in batches of 8: a line per batch here (each is
  // another tenth), before the metrics line.
  const size_t p1 = text.find("inference_eval step 3: batch 1/3, 8 examples, ");
  const size_t p3 = text.find("inference_eval step 3: batch 3/3, 20 examples, ");
  const size_t result = text.find("inference_eval/gpl3_lines_copy step 3:");
  ASSERT_NE(p1, std::string::npos) << text;
  ASSERT_NE(p3, std::string::npos) << text;
  ASSERT_NE(result, std::string::npos) << text;
  EXPECT_LT(p1, p3);
  EXPECT_LT(p3, result);
  EXPECT_NE(text.find("examples/s, ETA", p1), std::string::npos) << text;
}


// An average's count may be 1 (one non-padding token); it stays an average
// (total / count over the steps), and a per-step metric is the mean of its
// step totals.
TEST(MetricAccumulator, KindsAreExplicitNotInferredFromCounts) {
  MetricAccumulator acc;
  acc.add({{"accuracy", Metric::average(1.0, 1.0)}, {"loss", Metric::step(10.0)}});
  acc.end_step();
  acc.add({{"accuracy", Metric::average(1.0, 3.0)}, {"loss", Metric::step(4.0)}});
  acc.add({{"accuracy", Metric::average(0.0, 1.0)}, {"loss", Metric::step(2.0)}});  // a second microbatch
  acc.end_step();
  EXPECT_DOUBLE_EQ(acc.last("accuracy"), 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(acc.last("loss"), 6.0);
  const auto v = acc.values();
  EXPECT_DOUBLE_EQ(v.at("accuracy"), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(v.at("loss"), (10.0 + 6.0) / 2.0);
  EXPECT_FALSE(acc.is_per_step("accuracy"));
  EXPECT_TRUE(acc.is_per_step("loss"));
}

// With microbatches the per-token loss still divides by the step's
// non-padding tokens (the microbatches' counts summed; a fresh metric used to
// start from a count of 1, one token too many).
// An MoE model trains in t5x's training mode at dropout rate 0 (the MoE
// pretrain runs' rate): the train capacity factor sets the experts'
// capacity, not the eval one (bad-input sweep, session 78: the step ran
// without a key at rate 0, so the MoE layers ran in eval mode).
TEST(Trainer, MoeTrainsWithTheTrainCapacityFactorAtDropoutRateZero) {
  auto first_loss = [](const std::string& name, const std::vector<std::string>& extra) {
    auto b = tiny_bindings(temp_dir(name), 1);
    b.push_back("GROUP_SIZE = 8");
    b.push_back("MIN_EXPERT_CAPACITY = 1");
    b.insert(b.end(), extra.begin(), extra.end());
    TrainRunConfig c =
        read_train_config(tiny_config(b, "configs/runs/moe/pretrain.gin", "configs/models/moe/tiny.gin"));
    EXPECT_EQ(c.model.network.dropout_rate, 0.0);
    Trainer t(c, Distributed::create(c.partitioner, make_single_communicator()), fast());
    const TrainResult r = t.train();
    EXPECT_EQ(r.losses.size(), 1u);
    return r.losses.empty() ? 0.0 : r.losses.front();
  };
  const double base = first_loss("moe_cf_base", {});
  EXPECT_NE(first_loss("moe_cf_train", {"TRAIN_EXPERT_CAPACITY_FACTOR = 0.01"}), base);  // fewer slots: more dropped
  EXPECT_EQ(first_loss("moe_cf_eval", {"EVAL_EXPERT_CAPACITY_FACTOR = 0.01"}), base);    // eval's, not training's
}

TEST(Trainer, PerTokenLossOverMicrobatchesCountsTheStepsTokens) {
  const std::string dir = temp_dir("console_mb");
  const int steps = 2;
  auto b = tiny_bindings(dir, steps);
  b.push_back("trainer.Trainer.num_microbatches = 2");
  const TrainRunConfig cfg = read_train_config(tiny_config(b));
  std::ostringstream log;
  TrainerOptions o = fast();
  o.log = &log;
  Trainer t(cfg, single(), o);
  ASSERT_EQ(t.train().status, TrainResult::Status::kDone);
  expect_per_token_loss_lines(cfg, log.str(), steps);
}

// T5's gin binding of span corruption's roll reaches seqio's default with
// every DatasetConfig read; unbound, it stays T5's False.
TEST(TrainerConfig, RandomRollOfSpanCorruptionFromGin) {
  const std::string dir = temp_dir("random_roll");
  auto b = tiny_bindings(dir, 1);
  b.push_back("random_spans_noise_mask.random_roll = True");
  (void)read_train_config(tiny_config(b));
  EXPECT_TRUE(seqio::preprocessors::random_spans_random_roll());
  (void)read_train_config(tiny_config(tiny_bindings(dir, 1)));
  EXPECT_FALSE(seqio::preprocessors::random_spans_random_roll());
  b.back() = "random_spans_noise_mask.random_rol = True";
  EXPECT_THROW(read_train_config(tiny_config(b)), gin::GinError);  // a typo is named, not ignored
}

}  // namespace
}  // namespace t5x::trainer
