// The sweep's report: report.md, report.json and the PNG plots (accuracy vs attention GFLOPs, test
// top-1 per epoch); sweep_report_json / sweep_report_markdown are declared in sweep.h.
#pragma once

#include "experiments/sweep.h"

namespace sparsevit::experiments {

// Writes the report files of `result` under config.output_dir and lists them in result.files.
void write_sweep_report(const SweepConfig& config, SweepResult& result);

}  // namespace sparsevit::experiments
