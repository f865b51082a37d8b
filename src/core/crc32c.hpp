#pragma once
// CRC32C (Castagnoli, the iSCSI/ext4 checksum) of the checkpoint shards and of
// TensorBoard's event records. The
// SSE4.2 crc32 instruction when the CPU has it (checked at run time), a
// slice-by-8 table otherwise; both give the same value.

#include <cstddef>
#include <cstdint>

namespace mpiaccel::detail {

/// Extends `crc` (0 for a fresh checksum) over `size` bytes. crc32c("123456789") == 0xE3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t size);

/// The portable slice-by-8 implementation (for tests comparing the two paths).
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t size);

/// True when crc32c() uses the SSE4.2 instruction on this CPU.
bool crc32c_hardware();

}  // namespace mpiaccel::detail
