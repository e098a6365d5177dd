#include "t5x/checkpoints/restore_map.h"

#include <gtest/gtest.h>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x {
namespace {

TEST(RestoreMap, SameNamesByDefault) {
  auto plan = plan_restore({"target/a", "state/step"}, {"state/step", "target/a"});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].checkpoint_path, "target/a");
  EXPECT_EQ(plan[1].reason, "same name");
}

TEST(RestoreMap, RulesWithGroupsSkipsAndFallback) {
  std::vector<AssignmentRule> rules = {
      {R"(target/decoder/layers_(\d+)/(.*))", R"(target/decoder/block_\1/\g<2>)"},
      {R"(state/param_states/.*)", std::nullopt},
  };
  RestoreOptions opt;
  opt.fallback_to_scratch = true;
  opt.strict = false;
  auto plan = plan_restore({"target/decoder/layers_3/mlp/wo/kernel", "state/param_states/x/v", "target/new"},
                           {"target/decoder/block_3/mlp/wo/kernel", "target/unused"}, rules, opt);
  EXPECT_EQ(plan[0].checkpoint_path, "target/decoder/block_3/mlp/wo/kernel");
  EXPECT_FALSE(plan[1].checkpoint_path);
  EXPECT_NE(plan[1].reason.find("skipped"), std::string::npos);
  EXPECT_FALSE(plan[2].checkpoint_path);
  EXPECT_NE(plan[2].reason.find("fresh"), std::string::npos);
}

TEST(RestoreMap, ErrorsListEveryProblem) {
  try {
    plan_restore({"target/a", "target/b"}, {"target/a", "target/extra"},
                 {{"target/zzz", std::nullopt}, {"target/(b)", "target/\\1_old"}});
    FAIL();
  } catch (const CheckpointError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("maps target/b to target/b_old"), std::string::npos) << w;
    EXPECT_NE(w.find("target/extra is not used"), std::string::npos) << w;
    EXPECT_NE(w.find("'target/zzz' matched nothing"), std::string::npos) << w;
  }
  EXPECT_THROW(plan_restore({"a"}, {"a"}, {{"(", "x"}}), std::invalid_argument);
  EXPECT_THROW(plan_restore({"target/missing"}, {}), CheckpointError);
}

}  // namespace
}  // namespace t5x
