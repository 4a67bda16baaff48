#include "core/failure_of.h"

namespace kestrel {

FailureReason FailureReasonOf(const Status& status) {
  if (status.Reason() != FailureReason::kNone) return status.Reason();
  switch (status.Code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return FailureReason::kBadConfig;
    case StatusCode::kCorruption:
      // A corrupted resume checkpoint never gets here (RunTrainAttempt falls
      // back to an older one, then to scratch): this is a stored dataset blob.
      return FailureReason::kDatasetErrors;
    case StatusCode::kIoError:
    case StatusCode::kResourceExhausted:
      return FailureReason::kIoError;
    case StatusCode::kUnavailable:
      // A service that does not answer: the metadata store (PostgreSQL) or
      // the artifact store (S3: restarting, the host cut off).
      return FailureReason::kStoreUnavailable;
    case StatusCode::kOk:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
    case StatusCode::kInternal:
      break;
  }
  return FailureReason::kError;
}

}  // namespace kestrel
