//! A GNU `ar` archive writer, just enough for device objects: an empty symbol index (so that
//! GNU ld accepts the archive: device objects define no symbols), a long-name table, members.

/// An archive holding `members` (name, bytes), in order.
pub(crate) fn gnu_archive(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    // Symbol index with zero symbols: a big-endian count of 0.
    member(&mut out, "/", &[0, 0, 0, 0]);
    let mut names = String::new();
    let mut headers = Vec::new();
    for (name, _) in members {
        if name.len() < 16 {
            headers.push(format!("{name}/"));
        } else {
            headers.push(format!("/{}", names.len()));
            names.push_str(name);
            names.push_str("/\n");
        }
    }
    if !names.is_empty() {
        member(&mut out, "//", names.as_bytes());
    }
    for ((_, data), header) in members.iter().zip(headers) {
        member(&mut out, &header, data);
    }
    out
}

fn member(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    let header = format!(
        "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
        name,
        0,
        0,
        0,
        if name.starts_with('/') && name.len() <= 2 { "0" } else { "644" },
        data.len()
    );
    debug_assert_eq!(header.len(), 60);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::read::archive::ArchiveFile;

    #[test]
    fn members_read_back_with_long_names() {
        let members = vec![
            ("short.o".to_string(), vec![1, 2, 3]),
            ("sycl-device-0-a-rather-long-name.o".to_string(), vec![4; 10]),
        ];
        let bytes = gnu_archive(&members);
        let archive = ArchiveFile::parse(&*bytes).unwrap();
        let read: Vec<(String, Vec<u8>)> = archive
            .members()
            .map(|m| {
                let m = m.unwrap();
                (String::from_utf8(m.name().to_vec()).unwrap(), m.data(&*bytes).unwrap().to_vec())
            })
            .collect();
        assert_eq!(read, members);
    }
}
