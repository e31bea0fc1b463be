//! `Header::decode` on arbitrary bytes and file lengths never panics.
//!
//! Input: `[flags, file_len (u64 LE), header bytes…]`. Flag bit 0 stores the
//! right magic and bit 1 the right checksum, so the fuzzer also explores
//! the field checks behind them.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use zen_pmem::header::{self, Header};

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let flags = data[0];
    let file_len = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let mut bytes = data[9..].to_vec();
    if bytes.len() >= 64 {
        if flags & 1 != 0 {
            bytes[0..8].copy_from_slice(&header::MAGIC.to_le_bytes());
        }
        if flags & 2 != 0 {
            let sum = header::checksum_word(&bytes[..64]);
            bytes[56..64].copy_from_slice(&sum.to_le_bytes());
        }
    }
    if let Ok(h) = Header::decode(Path::new("fuzz"), &bytes, file_len) {
        assert!(h.page_count * h.page_size <= file_len);
        let _ = h.uuid_string();
        let _ = h.encode();
    }
    if bytes.len() >= 80 {
        let _ = header::decode_catalog_root(u64::from_le_bytes(bytes[64..72].try_into().unwrap()));
    }
});
