//! The plain ABI: bytes in, bytes out, zero imports.

/// ABI version, major in the high 16 bits, minor in the low 16 bits.
pub const ABI_VERSION: u32 = 1 << 16;

#[no_mangle]
pub extern "C" fn rota_abi_version() -> u32 {
    ABI_VERSION
}
