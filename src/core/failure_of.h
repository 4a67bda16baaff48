// The failure reason of a Status, in one place: the job runner (`kestrel
// train --job`) and the CLI's job children (`val --job`) both classify their
// errors through it, so the same error gets the same reason, exit code and
// retry class whichever command hit it.
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
// anything else (kOk included) -> kError. Never read from the message.
FailureReason FailureReasonOf(const Status& status);

}  // namespace kestrel
