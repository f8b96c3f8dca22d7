// Fibottention (mask: fibo): head i attends along the diagonals |j-k| in a generalized
// Fibonacci sequence seeded by row i of the Wythoff array, up to a head-specific window.
#include <algorithm>
#include <string>

#include "patterns/mask_generators.h"
#include "patterns/python_random.h"
#include "patterns/seeded_rng.h"
#include "patterns/sequences.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr IntKwarg kWMin{"w_min", 5, "smallest head window (head 1)"};
constexpr IntKwarg kWMax{"w_max", 65,
                         "largest head window (head H); w_i = w_min + floor((i-1)(w_max-w_min)/(H-1))"};
constexpr ChoiceKwarg kSchedule{
    "schedule", "wythoff",
    "`wythoff` | `wythoff_modified` (two predecessors prepended) | `fibonacci` (Fib(1,1) for every head)"};
// The default `wythoff` follows the schedule (Wythoff rows, or Fib(1,1) for `schedule: fibonacci`).
constexpr ChoiceKwarg kSequence{"sequence", "wythoff",
                                "ablation: `fibonacci`, `pow2`, `pow3`, `square`, `cube`, `arithmetic`, "
                                "`fib_shifted`, or an explicit list of offsets"};
constexpr IntKwarg kStep{"step", 2, "`sequence: arithmetic`: the common difference c"};
constexpr BoolKwarg kShiftPerHead{"shift_per_head", false,
                                  "`sequence: arithmetic`: head i starts at (i-1) mod c instead of c"};
constexpr IntKwarg kShift{"shift", 0, "`sequence: fib_shifted`: head i uses Fib(i+shift, i+shift)"};
constexpr BoolKwarg kIncludeDiagonal{
    "include_diagonal", false, "ablation: every head also attends its own token (offset 0, the principal diagonal)"};
constexpr BoolKwarg kShuffleLayers{"shuffle_layers", true,
                                   "permute the heads' patterns per layer with a seeded permutation"};
constexpr IntKwarg kSeed{"seed", 0, "seed of the per-layer head permutation"};
constexpr ChoiceKwarg kCompat{"compat", "paper",
                              "`paper` (the definition above) | `reference` (the published code, quirks included)"};

// w_i = w_min + floor((i-1)(w_max-w_min)/(H-1)), i = 1..H (w_min when H = 1).
int64_t head_window(int64_t i, int64_t heads, int64_t w_min, int64_t w_max) {
  if (heads == 1) return w_min;
  // 128-bit: (i-1)(w_max-w_min) overflows 64 bits for windows near INT64_MAX.
  using i128 = __int128;
  return static_cast<int64_t>(w_min + static_cast<i128>(i - 1) * (w_max - w_min) / (heads - 1));
}

// The candidate offsets of head i (1-based) before the window cut, for the paper definition.
std::vector<int64_t> paper_sequence(int64_t i, int64_t limit, const MaskKwargs& kw, const std::string& schedule) {
  if (kw.has("sequence") && kw.is_list("sequence")) return kw.get_int_list("sequence", 0);
  const std::string sequence =
      kSequence.read(kw, {"wythoff", "fibonacci", "pow2", "pow3", "square", "cube", "arithmetic", "fib_shifted"});
  if (sequence == "fibonacci") return fibonacci_terms({1, 1}, limit);
  if (sequence == "pow2") return power_terms(2, limit);
  if (sequence == "pow3") return power_terms(3, limit);
  if (sequence == "square") return polynomial_terms(2, limit);
  if (sequence == "cube") return polynomial_terms(3, limit);
  if (sequence == "arithmetic") {
    const int64_t step = kStep.read(kw, 1);
    const bool shifted = kShiftPerHead.read(kw);
    return arithmetic_terms(step, shifted ? (i - 1) % step : 0, limit);
  }
  if (sequence == "fib_shifted") {
    const int64_t start = i + kShift.read(kw, 0);
    return fibonacci_terms({start, start}, limit);
  }
  if (schedule == "fibonacci") return fibonacci_terms({1, 1}, limit);
  const SequenceSeed seed = schedule == "wythoff_modified" ? modified_wythoff_row(i) : wythoff_row(i);
  return fibonacci_terms(seed, limit);
}

// The published reference's get_fibonacci(a, b, w): [a, b, ...] while the last term <= w,
// minus the last; so `a` is kept even when it exceeds the window.
std::vector<int64_t> reference_sequence(SequenceSeed seed, int64_t w) {
  std::vector<int64_t> seq = {seed.a, seed.b};
  while (seq.back() <= w) seq.push_back(seq[seq.size() - 1] + seq[seq.size() - 2]);
  seq.pop_back();
  return seq;
}

Pattern build_fibottention(const MaskContext& ctx, const MaskKwargs& kw) {
  const int64_t heads = ctx.num_heads;
  const std::string compat = kCompat.read(kw, {"paper", "reference"});
  const std::string schedule = kSchedule.read(kw, {"wythoff", "wythoff_modified", "fibonacci"});
  const bool shuffle = kShuffleLayers.read(kw);
  const uint64_t seed = static_cast<uint64_t>(kSeed.read(kw, 0));
  Pattern pattern(ctx.num_tokens, ctx.num_heads, ctx.num_prefix_tokens);

  std::vector<std::vector<int32_t>> offsets(heads);  // per logical head i-1
  std::vector<int64_t> windows(heads);
  std::vector<int32_t> order;  // physical head h gets logical head order[h]
  std::vector<int32_t> globals;

  if (compat == "reference") {
    for (const char* unsupported :
         {"sequence", "w_min", "w_max", "step", "shift", "shift_per_head", "seed", "include_diagonal"})
      if (kw.has(unsupported))
        throw UsageError(kw.describe(unsupported) + ": not used by `compat: reference` (its windows and head "
                         "order are fixed by the reference implementation)");
    if (schedule == "fibonacci")
      throw UsageError(kw.describe("schedule") + ": `compat: reference` supports wythoff and wythoff_modified");
    if (kw.has("class_token") && !class_token_is_global(ctx, kw))
      throw UsageError(kw.describe("class_token") + ": `compat: reference` always connects the class token");
    // Reference quirks: every head's window is the number of patch tokens, offset 0 kept when
    // the modified sequence contains it, the class token row/column always on.
    const int64_t patches = ctx.num_patches();
    for (int64_t i = 1; i <= heads; ++i) {
      const SequenceSeed row = schedule == "wythoff_modified" ? modified_wythoff_row(i) : wythoff_row(i);
      for (int64_t f : reference_sequence(row, patches))
        if (f < patches) offsets[i - 1].push_back(static_cast<int32_t>(f));
      windows[i - 1] = patches;
    }
    if (shuffle) {
      // Python's random.seed(layer); random.shuffle(heads), layer 0-based.
      order = python_shuffled_range(ctx.layer, ctx.num_heads);
    }
    if (ctx.num_prefix_tokens > 0) globals = {0};
  } else {
    const int64_t w_min = kWMin.read(kw, 1);
    const int64_t w_max = kWMax.read(kw, 1);
    if (w_min > w_max)
      throw UsageError(kw.describe("w_min") + ": w_min (" + std::to_string(w_min) + ") must be <= w_max (" +
                       std::to_string(w_max) + ")");
    const int64_t largest_offset = ctx.num_tokens - 1;
    const bool diagonal = kIncludeDiagonal.read(kw);  // the paper's ablation (off by default)
    for (int64_t i = 1; i <= heads; ++i) {
      if (diagonal) offsets[i - 1].push_back(0);
      int64_t w = head_window(i, heads, w_min, w_max);
      if (w > largest_offset && largest_offset >= 1) {
        pattern.add_warning("fibo: window " + std::to_string(w) + " of head " + std::to_string(i) +
                            " exceeds the largest offset " + std::to_string(largest_offset) + "; clamped");
        w = largest_offset;
      }
      for (int64_t f : paper_sequence(i, w, kw, schedule))
        if (f > 0 && f <= w) offsets[i - 1].push_back(static_cast<int32_t>(f));  // main diagonal excluded
      windows[i - 1] = w;
    }
    if (shuffle) order = seeded_permutation(seed, static_cast<uint64_t>(ctx.layer), ctx.num_heads);
    globals = class_token_globals(ctx, kw);
  }

  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    const int32_t logical = order.empty() ? h : order[h];
    pattern.set_head_diagonals(h, DiagonalStructure{offsets[logical], globals});
    pattern.set_window(h, windows[logical]);
  }
  return pattern;
}

}  // namespace

MaskGenerator fibottention_generator() {
  return MaskGenerator{
      "fibo",
      "Fibottention: head i attends along |j-k| in Fib(a_i, b_i) (row i of the Wythoff array) up to window w_i",
      {
          kWMin.doc_entry(),
          kWMax.doc_entry(),
          kSchedule.doc_entry(),
          kSequence.doc_entry(),
          kStep.doc_entry(),
          kShiftPerHead.doc_entry(),
          kShift.doc_entry(),
          kIncludeDiagonal.doc_entry(),
          class_token_kwarg_doc(),
          kShuffleLayers.doc_entry(),
          kSeed.doc_entry(),
          kCompat.doc_entry(),
      },
      false,
      build_fibottention,
  };
}

}  // namespace sparsevit::patterns
