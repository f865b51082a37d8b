"""The values tests/helpers/ckpt_driver.cpp saves, computed with numpy, so
outside readers can be checked against the formula and not against mpiaccel."""
import numpy as np

COLS = 256


def values_f32(step, count, first=0):
    idx = np.arange(first, first + count, dtype=np.int64)
    return ((idx * 2654435761) % 65536).astype(np.float32) / np.float32(256.0) + np.float32(step)


def bf16_bits(f32):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even like c10."""
    bits = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def expected(step, w_rows, b_rows=37):
    """name -> (numpy array of the saved values, 'float32'|'bfloat16'|'int64')."""
    w = values_f32(step, w_rows * COLS).reshape(w_rows, COLS)
    return {
        "model/w": (w, "float32"),
        "model/b": (bf16_bits_to_f32(bf16_bits(values_f32(step, b_rows))), "bfloat16"),
        "model/s": (np.array(step, dtype=np.int64), "int64"),
        "optim/w/exp_avg": (w, "float32"),
    }
