// ctest: links mpiaccel; timeout 60
// CRC32C against published vectors (RFC 3720 B.4, the "123456789" check
// value), and the hardware path against the portable one on every length and
// alignment the 3-way interleave and its tails can see.
#define BOOST_TEST_MODULE crc32c
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/crc32c.hpp"

using mpiaccel::detail::crc32c;
using mpiaccel::detail::crc32c_portable;

namespace {
std::vector<unsigned char> bytes_of(std::initializer_list<int> init) {
  return std::vector<unsigned char>(init.begin(), init.end());
}
}  // namespace

BOOST_AUTO_TEST_CASE(check_value) {
  const std::string text = "123456789";
  BOOST_TEST(crc32c(0, text.data(), text.size()) == 0xE3069283u);
  BOOST_TEST(crc32c_portable(0, text.data(), text.size()) == 0xE3069283u);
  BOOST_TEST(crc32c(0, nullptr, 0) == 0u);
}

BOOST_AUTO_TEST_CASE(rfc3720_vectors) {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  for (auto f : {crc32c, crc32c_portable}) {
    BOOST_TEST(f(0, zeros.data(), 32) == 0x8A9136AAu);
    BOOST_TEST(f(0, ones.data(), 32) == 0x62A8AB43u);
    BOOST_TEST(f(0, up.data(), 32) == 0x46DD794Eu);
    BOOST_TEST(f(0, down.data(), 32) == 0x113FDB5Cu);
  }
  // An iSCSI read command PDU (RFC 3720 B.4).
  auto pdu = bytes_of({0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                       0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                       0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                       0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  BOOST_TEST(crc32c(0, pdu.data(), pdu.size()) == 0xD9963A56u);
}

BOOST_AUTO_TEST_CASE(hardware_equals_portable_on_all_lengths_and_alignments) {
  BOOST_TEST_MESSAGE("hardware crc32c: " << mpiaccel::detail::crc32c_hardware());
  std::mt19937_64 rng(42);
  std::vector<unsigned char> data(3 * 8192 * 3 + 64);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const size_t lengths[] = {0, 1, 7, 8, 9, 63, 64, 4095, 8192, 3 * 8192 - 1, 3 * 8192,
                            3 * 8192 + 1, 6 * 8192 + 13, 9 * 8192};
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t n : lengths) {
      BOOST_TEST_CONTEXT("offset " << offset << " length " << n) {
        BOOST_TEST(crc32c(0, data.data() + offset, n) == crc32c_portable(0, data.data() + offset, n));
      }
    }
}

BOOST_AUTO_TEST_CASE(incremental_equals_one_shot) {
  std::vector<unsigned char> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 31 + 7);
  const uint32_t whole = crc32c(0, data.data(), data.size());
  for (size_t split : {size_t(0), size_t(1), size_t(24575), size_t(24576), size_t(50001), data.size()}) {
    uint32_t part = crc32c(0, data.data(), split);
    part = crc32c(part, data.data() + split, data.size() - split);
    BOOST_TEST(part == whole, "split at " << split);
  }
}

BOOST_AUTO_TEST_CASE(detects_a_flipped_bit) {
  std::vector<unsigned char> data(1 << 16, 0x5A);
  const uint32_t before = crc32c(0, data.data(), data.size());
  data[12345] ^= 0x10;
  BOOST_TEST(crc32c(0, data.data(), data.size()) != before);
}
