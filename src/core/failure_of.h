// The failure reason of a Status, in one place: every job kind's attempt
// (app::RunAttempt, app/job_kinds.h: train, val, export --job) classifies its
// runner's error through it, so the same error gets the same reason, exit
// code and retry class whichever kind hit it.
//
// Kept apart from failure.h and status.h on purpose: those two are included by
// every file of the tree, this by the few that classify.
#pragma once

#include "core/failure.h"
#include "core/status.h"

namespace kestrel {

// The reason set where the error started (Status::WithReason) wins; else the
// status code decides: kInvalidArgument / kNotFound -> kBadConfig,
// kCorruption -> kDatasetErrors, kIoError / kResourceExhausted -> kIoError,
// kUnavailable (the metadata or the artifact store does not answer) ->
// kStoreUnavailable, anything else (kOk included) -> kError. Never read from
// the message.
FailureReason FailureReasonOf(const Status& status);

}  // namespace kestrel
