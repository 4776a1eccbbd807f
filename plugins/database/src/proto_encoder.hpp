#pragma once
// Protocol buffers' wire format, the few pieces the Perfetto writer needs (perfetto.cpp): varints,
// doubles and length-delimited fields, written into a byte string. A nested message is encoded in a
// proto_message of its own and appended whole with its length; the messages here are small (a
// trace packet), so the copy is cheaper than reserving room for a length and moving bytes back.
// https://protobuf.dev/programming-guides/encoding/
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kairos::database {

class proto_message {
 public:
  // Wire type 0: uint32, uint64, bool, an enum, and int32/int64 as two's complement (a negative
  // value takes ten bytes, as protobuf writes it).
  proto_message& varint(std::uint32_t field, std::uint64_t value) {
    key(field, 0);
    append_varint(value);
    return *this;
  }
  // Wire type 1: double.
  proto_message& real(std::uint32_t field, double value) {
    key(field, 1);
    char bytes[sizeof value];
    std::memcpy(bytes, &value, sizeof value);  // little-endian, as the wire format wants (x86, arm64)
    data_.append(bytes, sizeof bytes);
    return *this;
  }
  // Wire type 2: string, bytes, a nested message.
  proto_message& bytes(std::uint32_t field, std::string_view value) {
    key(field, 2);
    append_varint(value.size());
    data_.append(value);
    return *this;
  }
  proto_message& message(std::uint32_t field, const proto_message& nested) { return bytes(field, nested.data_); }

  const std::string& data() const { return data_; }
  bool empty() const { return data_.empty(); }
  void clear() { data_.clear(); }

 private:
  void key(std::uint32_t field, std::uint32_t wire_type) { append_varint((std::uint64_t{field} << 3) | wire_type); }
  void append_varint(std::uint64_t value) {
    while (value >= 0x80) {
      data_.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    data_.push_back(static_cast<char>(value));
  }

  std::string data_;
};

}  // namespace kairos::database
