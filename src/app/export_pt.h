// `kestrel export format=pt`: any weights Kestrel reads (its safetensors, a
// reference .pt) written as a reference-framework checkpoint (model/
// pt_writer.h) that YOLO("x.pt") loads, and read back by Kestrel's own .pt
// reader to check that every tensor is bit-equal before the file is
// reported. Torch-free: no backend is needed. Called by ExportModel
// (export.h) for format=pt; layout and what was verified: docs/export.md.
#pragma once

#include <string>

#include "app/export.h"
#include "core/env.h"
#include "core/status.h"

namespace kestrel::app {

// Writes request.model's weights to request.output (default: the weights'
// path with .pt, or NAME_vN.pt for a registry reference), crash-safely.
// The checkpoint's train_args record imgsz (ChooseImgsz: the weights' own
// size, or imgsz= when given) and model; names are the weights' own (else
// class<i>). ONNX-only keys (dynamic, half, int8, nms, data) are refused
// naming the key; an output that is the input file is refused (`output`).
// ExportResult: format "pt", path, weights, arch, nc, names, names_source,
// imgsz_h/w, bytes, parameters (elements of all tensors), verified (the
// bytes read back bit-equal before they were written; a mismatch is an
// Internal error and nothing is written).
Result<ExportResult> ExportPtModel(Env& env, const ExportRequest& request,
                                   const ExportWeightsResolver& resolve = {});

// The text `kestrel export format=pt` prints.
std::string ExportPtText(const ExportResult& result);

}  // namespace kestrel::app
