// CRC32C, reflected polynomial 0x82F63B78. The hardware path runs three
// independent crc32 streams over adjacent blocks and combines them with a
// shift table, because the instruction has a 3-cycle latency but a 1-cycle
// throughput: one stream alone reaches only a third of the possible speed.

#include "core/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <nmmintrin.h>
#define MPIACCEL_CRC32C_X86 1
#endif

namespace mpiaccel::detail {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

struct Tables {
  uint32_t slice[8][256];
};

Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t.slice[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 8; ++s)
      t.slice[s][i] = (t.slice[s - 1][i] >> 8) ^ t.slice[0][t.slice[s - 1][i] & 0xFFu];
  return t;
}

const Tables& tables() {
  static const Tables t = make_tables();
  return t;
}

// GF(2) 32x32 matrix helpers for "advance a CRC over n zero bytes", used to
// combine the three hardware streams (zlib's crc32_combine construction).
uint32_t gf2_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (int i = 0; vec; ++i, vec >>= 1)
    if (vec & 1u) sum ^= mat[i];
  return sum;
}

void gf2_square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// Operator advancing a (raw, non-inverted) CRC register over `len` zero bytes.
std::array<uint32_t, 32> zeros_operator(size_t len) {
  std::array<uint32_t, 32> result{}, odd{}, even{};
  odd[0] = kPoly;  // one zero bit
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n, row <<= 1) odd[n] = row;
  gf2_square(even.data(), odd.data());  // two zero bits
  gf2_square(odd.data(), even.data());  // four zero bits
  for (int n = 0; n < 32; ++n) result[n] = 1u << n;  // identity
  // odd now = 4 bits; square up to 8 bits = one byte, then by powers of two.
  gf2_square(even.data(), odd.data());  // eight bits
  std::array<uint32_t, 32> power = even, tmp{};
  while (len) {
    if (len & 1u) {
      for (int n = 0; n < 32; ++n) tmp[n] = gf2_times(power.data(), result[n]);
      result = tmp;
    }
    len >>= 1;
    if (len) {
      gf2_square(tmp.data(), power.data());
      power = tmp;
    }
  }
  return result;
}

// A 4x256 table form of zeros_operator(len) so applying it costs 4 lookups.
struct Shift {
  uint32_t table[4][256];
};

Shift make_shift(size_t len) {
  auto op = zeros_operator(len);
  Shift s{};
  for (int byte = 0; byte < 4; ++byte)
    for (uint32_t v = 0; v < 256; ++v) s.table[byte][v] = gf2_times(op.data(), v << (8 * byte));
  return s;
}

uint32_t apply_shift(const Shift& s, uint32_t crc) {
  return s.table[0][crc & 0xFF] ^ s.table[1][(crc >> 8) & 0xFF] ^ s.table[2][(crc >> 16) & 0xFF] ^
         s.table[3][crc >> 24];
}

uint32_t portable_raw(uint32_t crc, const unsigned char* p, size_t n) {
  const Tables& t = tables();
  while (n && (reinterpret_cast<uintptr_t>(p) & 7u)) {
    crc = (crc >> 8) ^ t.slice[0][(crc ^ *p++) & 0xFFu];
    --n;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    // Little-endian load: the first byte is the lowest.
    uint32_t lo = static_cast<uint32_t>(word) ^ crc;
    uint32_t hi = static_cast<uint32_t>(word >> 32);
    crc = t.slice[7][lo & 0xFF] ^ t.slice[6][(lo >> 8) & 0xFF] ^ t.slice[5][(lo >> 16) & 0xFF] ^
          t.slice[4][lo >> 24] ^ t.slice[3][hi & 0xFF] ^ t.slice[2][(hi >> 8) & 0xFF] ^
          t.slice[1][(hi >> 16) & 0xFF] ^ t.slice[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t.slice[0][(crc ^ *p++) & 0xFFu];
  return crc;
}

#ifdef MPIACCEL_CRC32C_X86
constexpr size_t kBlock = 8192;  // bytes per stream in the 3-way loop

bool cpu_has_sse42() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_SSE4_2) != 0;
}

__attribute__((target("sse4.2"))) uint32_t hw_serial(uint32_t crc, const unsigned char* p, size_t n) {
  while (n && (reinterpret_cast<uintptr_t>(p) & 7u)) {
    crc = _mm_crc32_u8(crc, *p++);
    --n;
  }
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  crc = static_cast<uint32_t>(c);
  while (n--) crc = _mm_crc32_u8(crc, *p++);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t hw_raw(uint32_t crc, const unsigned char* p, size_t n) {
  static const Shift shift_block = make_shift(kBlock);
  static const Shift shift_two_blocks = make_shift(2 * kBlock);
  while (n >= 3 * kBlock) {
    uint64_t c0 = crc, c1 = 0, c2 = 0;
    const unsigned char* p1 = p + kBlock;
    const unsigned char* p2 = p + 2 * kBlock;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p1 + i, 8);
      std::memcpy(&w2, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    // crc(A B C) = shift(crc(A), |B|+|C|) ^ shift(crc(B), |C|) ^ crc(C), raw registers.
    crc = apply_shift(shift_two_blocks, static_cast<uint32_t>(c0)) ^
          apply_shift(shift_block, static_cast<uint32_t>(c1)) ^ static_cast<uint32_t>(c2);
    p += 3 * kBlock;
    n -= 3 * kBlock;
  }
  return hw_serial(crc, p, n);
}
#endif

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t size) {
  return ~portable_raw(~crc, static_cast<const unsigned char*>(data), size);
}

bool crc32c_hardware() {
#ifdef MPIACCEL_CRC32C_X86
  static const bool has = cpu_has_sse42();
  return has;
#else
  return false;
#endif
}

uint32_t crc32c(uint32_t crc, const void* data, size_t size) {
#ifdef MPIACCEL_CRC32C_X86
  if (crc32c_hardware()) return ~hw_raw(~crc, static_cast<const unsigned char*>(data), size);
#endif
  return crc32c_portable(crc, data, size);
}

}  // namespace mpiaccel::detail
