//! ELF note framing for the embedded image set: building the note that `sycl-ld` emits, and
//! walking the notes of a `PT_NOTE` segment (or section) that the runtime and `inspect` read.

use crate::{DecodeError, NOTE_NAME};

/// The dynamic symbol `sycl-ld` defines in a shared library whose payload (the note's
/// descriptor) has hash `payload_hash` ([`payload_hash`]). The runtime looks it up in the
/// global scope to tell a library opened with `RTLD_LOCAL` from one whose symbols everyone
/// sees. The name depends only on the payload, so reader and writer agree without another
/// table.
pub fn scope_marker_symbol(payload_hash: u64) -> String {
    format!("__sycl_images_{payload_hash:016x}")
}

/// A 64-bit hash of a payload, stable across builds and platforms (unlike std's hasher), and
/// fast, since discovery hashes every loaded payload: FNV-1a's step taken a word at a time in
/// four independent lanes, which the processor runs side by side.
pub fn payload_hash(payload: &[u8]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut lanes = [
        0xcbf2_9ce4_8422_2325u64 ^ payload.len() as u64,
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
    ];
    let mut blocks = payload.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane = (*lane ^ u64::from_le_bytes(word.try_into().unwrap())).wrapping_mul(PRIME);
            *lane ^= *lane >> 29;
        }
    }
    let mut h =
        lanes[0] ^ lanes[1].rotate_left(16) ^ lanes[2].rotate_left(32) ^ lanes[3].rotate_left(48);
    for b in blocks.remainder() {
        h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
    }
    (h ^ (h >> 32)).wrapping_mul(PRIME)
}

/// One ELF note (`Elf64_Nhdr`, name, descriptor) with 4-byte padding, as the linker expects
/// in an `SHT_NOTE` section.
pub fn elf_note(note_type: u32, desc: &[u8]) -> Vec<u8> {
    let name = format!("{NOTE_NAME}\0");
    let mut out = Vec::with_capacity(12 + name.len() + desc.len() + 8);
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&crate::len_u32(desc.len()).to_le_bytes());
    out.extend_from_slice(&note_type.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    pad4(&mut out);
    out.extend_from_slice(desc);
    pad4(&mut out);
    out
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn align_up(n: usize, align: usize) -> Option<usize> {
    n.checked_add(align - 1).map(|n| n & !(align - 1))
}

/// The descriptors of every note named [`NOTE_NAME`] with type `note_type` in `segment`, the
/// contents of a note segment or section. Other notes (build id, ABI tag) are skipped; a
/// malformed note header is an error rather than a guess. `align` is the segment's or
/// section's alignment: 8-aligned note segments (`.note.gnu.property`) pad to 8, others to 4.
pub fn find_notes(segment: &[u8], note_type: u32, align: u64) -> Result<Vec<&[u8]>, DecodeError> {
    let align = if align == 8 { 8 } else { 4 };
    let mut found = Vec::new();
    let mut pos = 0usize;
    while pos < segment.len() {
        let header = segment.get(pos..pos + 12).ok_or(DecodeError::Truncated {
            needed: 12 - (segment.len() - pos).min(12),
            offset: pos,
        })?;
        let word = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().unwrap()) as usize;
        let (namesz, descsz, ntype) = (word(0), word(4), word(8) as u32);
        let name_start = pos + 12;
        let desc_start = align_up(name_start + namesz, align)
            .ok_or_else(|| DecodeError::Invalid("note name size overflows".into()))?;
        let desc_end = desc_start
            .checked_add(descsz)
            .filter(|&end| end <= segment.len())
            .ok_or(DecodeError::Truncated { needed: descsz, offset: desc_start })?;
        let name = &segment[name_start..name_start + namesz];
        if ntype == note_type && name.strip_suffix(b"\0") == Some(NOTE_NAME.as_bytes()) {
            found.push(&segment[desc_start..desc_end]);
        }
        pos = align_up(desc_end, align).unwrap_or(usize::MAX);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_round_trip_among_others() {
        let mut segment = Vec::new();
        // A GNU build-id note first, as linkers put one in the same segment.
        segment.extend_from_slice(&4u32.to_le_bytes());
        segment.extend_from_slice(&3u32.to_le_bytes());
        segment.extend_from_slice(&3u32.to_le_bytes());
        segment.extend_from_slice(b"GNU\0\x01\x02\x03\0");
        segment.extend(elf_note(7, b"hello"));
        assert_eq!(find_notes(&segment, 7, 4).unwrap(), vec![&b"hello"[..]]);
        assert!(find_notes(&segment, 8, 4).unwrap().is_empty());
    }

    #[test]
    fn lying_descriptor_size_is_an_error() {
        let mut note = elf_note(7, b"hello");
        note[4] = 200;
        assert!(find_notes(&note, 7, 4).is_err());
        for len in 1..note.len() {
            let _ = find_notes(&note[..len], 7, 4); // must not panic
        }
    }
}
