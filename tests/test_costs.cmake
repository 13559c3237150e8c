# The tests that take longest (seconds in the Release build, on two cores), for ctest -j to start
# first: in a fresh build directory ctest has no timings of its own yet, and would start them in
# the order they are listed, some last, with one core idle while they finish. Once a run has
# timed them (Testing/Temporary/CTestCostData.txt), ctest goes by its own timings. A name that no
# longer exists is ignored.
set_tests_properties(
  FaultInjection.NewestCheckpointSurvivesSigkillAtRandomMoments
  Mpi.ProcessesThatDisagreeAreRefusedAtTheStart
  Mpi.AJobWhoseProcessesRunOtherCommandsEndsAtTheStart
  PROPERTIES COST 8)
set_tests_properties(
  InductionTraining.ShortRunFormsAnInductionHead
  Mpi.ToyTasksOnOneTwoAndThreeProcessesTrainAsOneProcess
  Mpi.SignalsSaveACheckpointThatResumes
  Mpi.TextTaskOnOneTwoAndThreeProcessesTrainsAsOneProcess
  Mpi.ABatchSmallerThanTheGroupAndOtherCommandsAreRefused
  Mpi.AKilledProcessStopsTheJobAndTheCheckpointsStayWhole
  PROPERTIES COST 4)
set_tests_properties(
  LongContext.TrainsAboveTheScoreLimitAndRefusesToKeepTheWeights
  Mpi.ARunResumesOnAnotherNumberOfProcesses
  Mpi.ADivergingRunStopsEveryProcessAndKeepsItsLastGoodCheckpoint
  Mpi.AnErrorOnOneProcessStopsTheJob
  GradientCheckCoverage.EveryOpThatRecordsABackwardHasACheck
  DefaultRun.EncoderDecoderLossesMatchTheFixture
  DefaultRun.DecoderLossesMatchTheFixture
  PROPERTIES COST 2)
