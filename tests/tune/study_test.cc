// The study planner on a simulated study: trials advance one epoch at a
// time in a scripted order, with a diverging trial, an infra failure, ASHA
// pruning and promotions, and a planner rebuilt midway (the coordinator's
// restart) taking the same decisions.
#include "tune/study.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kestrel::tune {
namespace {

SearchSpace Space() {
  Param x;
  x.key = "mosaic";
  x.kind = ParamKind::kFloat;
  x.low = 0;
  x.high = 1;
  Param c;
  c.key = "optimizer";
  c.kind = ParamKind::kCategorical;
  c.choices = {"SGD", "AdamW"};
  SearchSpace s;
  s.params = {x, c};
  return s;
}

// The fitness a trial reports at `epoch`: a learning curve whose ceiling
// depends on the params (best at mosaic 0.3 with AdamW).
double Curve(const std::vector<double>& p, int epoch) {
  const double ceiling = 1.0 - (p[0] - 0.3) * (p[0] - 0.3) - (p[1] == 1 ? 0.0 : 0.2);
  return ceiling * (1.0 - std::exp(-epoch / 3.0));
}

struct Outcome {
  std::vector<Trial> trials;
  int epochs_run = 0;
  int resumes = 0;  // ASHA promotions: a pruned trial continued from its checkpoint
};

// Runs a study to the end. Each step advances the running trial chosen by
// `step % running` by one epoch. Trial `diverges` fails at its epoch 2 (the
// trial's fault); trial `infra` fails before its first epoch (the job
// system's). After `restart_at` steps the planner is rebuilt from scratch.
Outcome Simulate(const StudySettings& settings, int64_t diverges, int64_t infra, int restart_at = -1) {
  auto planner = std::make_unique<StudyPlanner>(Space(), settings);
  Outcome out;
  auto& trials = out.trials;
  for (int step = 0; step < 10000; ++step) {
    if (step == restart_at) planner = std::make_unique<StudyPlanner>(Space(), settings);
    for (const auto& a : planner->Plan(trials)) {
      if (a.kind == StudyAction::Kind::kSubmit) {
        Trial t;
        t.number = a.number;
        t.state = TrialState::kRunning;
        t.params = a.params;
        trials.push_back(t);
      } else {
        ++out.resumes;
        for (auto& t : trials) {
          if (t.number == a.number) t.state = TrialState::kRunning;  // from its checkpoint
        }
      }
    }
    std::vector<size_t> running;
    for (size_t i = 0; i < trials.size(); ++i) {
      if (trials[i].state == TrialState::kRunning) running.push_back(i);
    }
    if (running.empty()) {
      EXPECT_TRUE(planner->Finished(trials));
      return out;
    }
    EXPECT_FALSE(planner->Finished(trials));
    Trial& t = trials[running[static_cast<size_t>(step) % running.size()]];
    if (t.number == infra) {
      t.state = TrialState::kInfraFailed;
      continue;
    }
    const int epoch = static_cast<int>(t.intermediate.size()) + 1;
    ++out.epochs_run;
    if (t.number == diverges && epoch == 2) {
      t.state = TrialState::kFailed;  // NaN loss: no value recorded
      continue;
    }
    t.intermediate.push_back(Curve(t.params, epoch));
    if (epoch == settings.epochs) {
      t.state = TrialState::kSucceeded;
      t.value = t.intermediate.back();
    } else if (planner->OnEpoch(trials, t) == PruneDecision::kPrune) {
      t.state = TrialState::kPruned;
    }
  }
  ADD_FAILURE() << "the study did not finish";
  return out;
}

StudySettings Settings() {
  StudySettings s;
  s.trials = 16;
  s.parallel = 3;
  s.epochs = 9;  // ASHA rungs 1, 3
  s.seed = 7;
  return s;
}

int Count(const std::vector<Trial>& trials, TrialState state) {
  return static_cast<int>(
      std::count_if(trials.begin(), trials.end(), [&](const Trial& t) { return t.state == state; }));
}

TEST(StudyPlanner, SpendsExactlyTheTrialsWithFailuresAndPruning) {
  const Outcome o = Simulate(Settings(), /*diverges=*/12, /*infra=*/4);
  EXPECT_EQ(StudyPlanner::Spent(o.trials), 16);
  EXPECT_EQ(o.trials.size(), 17u);  // the infra-failed trial was replaced, not counted
  EXPECT_EQ(Count(o.trials, TrialState::kInfraFailed), 1);
  EXPECT_EQ(Count(o.trials, TrialState::kFailed), 1);  // the diverged one: not retried, no value
  EXPECT_FALSE(o.trials[12].value.has_value());
  EXPECT_GT(Count(o.trials, TrialState::kPruned), 0);
  EXPECT_GT(Count(o.trials, TrialState::kSucceeded), 0);
  EXPECT_EQ(Count(o.trials, TrialState::kSucceeded) + Count(o.trials, TrialState::kPruned) + 2, 17);
  // Trial numbers are dense: 0..16 in suggestion order.
  for (size_t i = 0; i < o.trials.size(); ++i) EXPECT_EQ(o.trials[i].number, static_cast<int64_t>(i));
}

TEST(StudyPlanner, SameSeedSameStudyAndARestartChangesNothing) {
  const Outcome a = Simulate(Settings(), 12, 4);
  const Outcome b = Simulate(Settings(), 12, 4, /*restart_at=*/25);
  ASSERT_EQ(a.trials.size(), b.trials.size());
  for (size_t i = 0; i < a.trials.size(); ++i) {
    EXPECT_EQ(a.trials[i].params, b.trials[i].params) << i;
    EXPECT_EQ(a.trials[i].state, b.trials[i].state) << i;
    EXPECT_EQ(a.trials[i].intermediate, b.trials[i].intermediate) << i;
  }
  StudySettings other = Settings();
  other.seed = 8;
  EXPECT_NE(Simulate(other, 12, 4).trials[0].params, a.trials[0].params);
}

TEST(StudyPlanner, AshaSavesEpochsAndPromotesFromCheckpoints) {
  StudySettings none = Settings();
  none.pruner = "none";
  const Outcome full = Simulate(none, -1, -1);
  const Outcome asha = Simulate(Settings(), -1, -1);
  EXPECT_EQ(full.epochs_run, 16 * 9);
  EXPECT_LT(asha.epochs_run, full.epochs_run);
  EXPECT_EQ(Count(full.trials, TrialState::kSucceeded), 16);
  // Trials stopped at rung 1 came back when later trials did worse there:
  // continued from their checkpoints, no new trial spent on them.
  EXPECT_GT(asha.resumes, 0);
  EXPECT_EQ(asha.trials.size(), 16u);
  EXPECT_EQ(full.resumes, 0);
}

TEST(StudyPlanner, PlanFillsOnlyFreeSlotsAndStopsAtTheBudget) {
  StudySettings s = Settings();
  s.trials = 4;
  s.parallel = 3;
  StudyPlanner planner(Space(), s);
  std::vector<Trial> trials;
  auto actions = planner.Plan(trials);
  ASSERT_EQ(actions.size(), 3u);
  for (const auto& a : actions) {
    Trial t;
    t.number = a.number;
    t.state = TrialState::kRunning;
    t.params = a.params;
    trials.push_back(t);
  }
  EXPECT_TRUE(planner.Plan(trials).empty());  // no free slot
  trials[0].state = TrialState::kFailed;
  actions = planner.Plan(trials);
  ASSERT_EQ(actions.size(), 1u);  // one slot, one trial of the 4 left
  EXPECT_EQ(actions[0].number, 3);
  Trial t;
  t.number = 3;
  t.state = TrialState::kRunning;
  trials.push_back(t);
  trials[1].state = TrialState::kSucceeded;
  EXPECT_TRUE(planner.Plan(trials).empty());  // the budget is spent
}

TEST(StudySettings, ValidateNamesTheSetting) {
  StudySettings s;
  EXPECT_TRUE(s.Validate().IsOk());
  s.parallel = 0;
  EXPECT_EQ(s.Validate().Where().field, "parallel");
  s = {};
  s.min_epochs = 40;
  EXPECT_EQ(s.Validate().Where().field, "min_epochs");
  s = {};
  s.sampler = "cmaes";
  EXPECT_EQ(s.Validate().Where().field, "sampler");
  s = {};
  s.pruner = "hyperband";
  EXPECT_EQ(s.Validate().Where().field, "pruner");
}

}  // namespace
}  // namespace kestrel::tune
