#pragma once
// The start/stop bookkeeping every accumulating component repeats: remember the reading at start,
// add the difference at stop. Works for scalars and for fixed arrays of counts.
#include <array>
#include <cstddef>

namespace kairos {

template <class Value>
struct phase_total {
  Value at_start{};
  Value total{};

  constexpr void begin(const Value& reading) noexcept { at_start = reading; }
  constexpr void end(const Value& reading) noexcept { add(total, reading, at_start); }

 private:
  template <class Scalar>
  static constexpr void add(Scalar& sum, const Scalar& now, const Scalar& then) noexcept {
    sum += now - then;
  }
  template <class Scalar, std::size_t Size>
  static constexpr void add(std::array<Scalar, Size>& sum, const std::array<Scalar, Size>& now,
                            const std::array<Scalar, Size>& then) noexcept {
    for (std::size_t i = 0; i < Size; ++i) sum[i] += now[i] - then[i];
  }
};

}  // namespace kairos
