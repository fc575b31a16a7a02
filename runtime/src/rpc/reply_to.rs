//! What a request's `reply-to` names, read before a server publishes anything to it.
//!
//! A direct reply-to address is `amq.rabbitmq.reply-to.<node and pid>.<key>`, where `<node
//! and pid>` is the base64 of an Erlang external term: a pid whose node is renamed
//! `reply@<hash>`, the hash of the caller's node. RabbitMQ 3.10 decodes it while it routes a
//! publish, in the publishing channel's process, and any surprise there (two tokens that are
//! not base64, base64 of anything but such a pid, a node name with no `@` or no number after
//! it, a hash no running node has) crashes that process: the broker closes the publisher's
//! **whole connection** with `541 INTERNAL_ERROR` (measured on 3.10.8; the decoding is
//! `rabbit_direct_reply_to:decode_reply_to_v2` and `pid_recomposition:from_binary`). So a
//! server checks the shape here, exactly as RabbitMQ reads it, and the hash against the
//! running nodes (`worker::reply_nodes`) before it sends a reply.

use crate::model::rpc::DIRECT_REPLY_TO;

/// Where a request asks for its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyAddress {
    /// A direct reply-to address of a caller on the node whose hash this is.
    Direct {
        /// The `<hash>` of the address's `reply@<hash>`: which node the caller is on.
        node: u64,
    },
    /// A queue's name (classic RPC: the caller reads its replies from a queue of its own).
    Queue,
}

/// The longest node name RabbitMQ can turn into an atom.
const MAX_NODE_CHARS: usize = 255;

/// What `address` names, or why RabbitMQ cannot route a reply to it without closing the
/// connection that publishes it.
pub(crate) fn classify(address: &str) -> Result<ReplyAddress, &'static str> {
    let Some(rest) = address.strip_prefix(DIRECT_REPLY_TO) else {
        return Ok(ReplyAddress::Queue);
    };
    let Some(suffix) = rest.strip_prefix('.') else {
        return Err("it starts like a direct reply-to address but is not one");
    };
    let Some((pid, key)) = suffix.split_once('.') else {
        return Err("a direct reply-to address needs a pid and a key after the prefix");
    };
    if pid.is_empty() || key.is_empty() || !key.bytes().all(is_base64) {
        return Err("the key of a direct reply-to address is not base64");
    }
    let term =
        crate::base64::decode(pid).ok_or("the pid of a direct reply-to address is not base64")?;
    let node = node_of_pid(&term).ok_or("the pid of a direct reply-to address is not a pid")?;
    let hash =
        node_hash(node).ok_or("the node of a direct reply-to address is not reply@<hash>")?;
    Ok(ReplyAddress::Direct { node: hash })
}

/// The node name of an Erlang external term holding one pid, as `pid_recomposition:from_binary`
/// reads it: version 131, `NEW_PID_EXT` (88) or `PID_EXT` (103), the node as a UTF-8 atom
/// (118 with a 2-byte length, or 119 with a 1-byte one), then id, serial and a creation of
/// 4 or 1 bytes, and nothing after.
fn node_of_pid(term: &[u8]) -> Option<&str> {
    let [131, 88 | 103, atom, rest @ ..] = term else {
        return None;
    };
    let (length, rest) = match (atom, rest) {
        (118, [high, low, rest @ ..]) => (usize::from(u16::from_be_bytes([*high, *low])), rest),
        (119, [length, rest @ ..]) => (usize::from(*length), rest),
        _ => return None,
    };
    if rest.len() != length + 12 && rest.len() != length + 9 {
        return None;
    }
    let node = std::str::from_utf8(&rest[..length]).ok()?;
    (node.chars().count() <= MAX_NODE_CHARS).then_some(node)
}

/// The hash in a node name `reply@<hash>`, the only node names RabbitMQ writes into direct
/// reply-to addresses (it reads the part after the first `@` as an integer).
fn node_hash(node: &str) -> Option<u64> {
    let hash = node.strip_prefix("reply@")?;
    if hash.is_empty() || !hash.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    hash.parse().ok()
}

fn is_base64(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address RabbitMQ 3.10.8 issued (`reply@9248884`, pid `<…,759,0>`).
    const ISSUED: &str =
        "amq.rabbitmq.reply-to.g1h2AA1yZXBseUA5MjQ4ODg0AAAC9wAAAABrDz2s.CDZGP1WEv+9VbAZ342fbWA==";

    #[test]
    fn an_issued_address_names_its_node() {
        assert_eq!(
            classify(ISSUED),
            Ok(ReplyAddress::Direct { node: 9_248_884 })
        );
        let unpadded_key = ISSUED.trim_end_matches('=');
        assert_eq!(
            classify(unpadded_key),
            Ok(ReplyAddress::Direct { node: 9_248_884 })
        );
    }

    #[test]
    fn a_queue_name_is_a_queue() {
        assert_eq!(classify("replies"), Ok(ReplyAddress::Queue));
        assert_eq!(classify("amq.gen-JzTY20BRgKO"), Ok(ReplyAddress::Queue));
    }

    /// Each of these closed the publishing connection of RabbitMQ 3.10.8 (541), or is
    /// nothing RabbitMQ issues.
    #[test]
    fn forged_direct_addresses_are_refused() {
        let not_a_pid = format!(
            "amq.rabbitmq.reply-to.{}.a",
            "g2gCZAABYWQAAWI=" // term_to_binary({a, b})
        );
        for forged in [
            "amq.rabbitmq.reply-to",
            "amq.rabbitmq.reply-to.",
            "amq.rabbitmq.reply-to.a",
            "amq.rabbitmq.reply-to.a.b",
            "amq.rabbitmq.reply-to.!!!!.b",
            "amq.rabbitmq.reply-to..b",
            "amq.rabbitmq.reply-to.g1h2AA1yZXBseUA5MjQ4ODg0AAAC9wAAAABrDz2s.",
            "amq.rabbitmq.reply-tox",
            &not_a_pid,
        ] {
            assert!(classify(forged).is_err(), "{forged}");
        }
    }

    #[test]
    fn a_pid_is_read_as_rabbitmq_reads_it() {
        let pid = |node: &[u8], tail: usize| {
            let mut term = vec![131, 88, 118, 0, node.len() as u8];
            term.extend_from_slice(node);
            term.extend(std::iter::repeat_n(0, tail));
            term
        };
        assert_eq!(node_of_pid(&pid(b"reply@1", 12)), Some("reply@1"));
        assert_eq!(node_of_pid(&pid(b"reply@1", 9)), Some("reply@1"));
        assert_eq!(node_of_pid(&pid(b"reply@1", 13)), None, "bytes after it");
        assert_eq!(node_of_pid(&pid(b"reply@1", 11)), None, "cut short");
        assert_eq!(
            node_of_pid(&pid(&[0xff, b'@', b'1'], 12)),
            None,
            "not UTF-8"
        );
        let mut short_atom = vec![131, 103, 119, 7];
        short_atom.extend_from_slice(b"reply@2");
        short_atom.extend([0; 9]);
        assert_eq!(node_of_pid(&short_atom), Some("reply@2"));
        assert_eq!(node_hash("reply@42"), Some(42));
        for node in [
            "rabbit@host",
            "reply@",
            "reply@-1",
            "reply@1a",
            "reply",
            "reply@99999999999999999999999",
        ] {
            assert_eq!(node_hash(node), None, "{node}");
        }
    }
}
