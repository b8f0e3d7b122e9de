//! Field-by-field comparison of `ibv_devinfo`-style output.
//!
//! [`parse`] turns the text into an ordered list of [`Entry`]s:
//! - sections: `hca_id:<name>` starts a device section, and `port:<n>` a port
//!   section inside it, named `hca_id:<name>/port:<n>` (so the ports of two
//!   devices do not collide). Lines before any `hca_id:` (the `-l` listing)
//!   are in the section `""`.
//! - a `key:<TAB>value` line is one entry; a `key:` line with no value is a
//!   header, and the more indented key lines under it are named
//!   `header/key` (`tso_caps/max_tso`, `rss_caps/supported_qp`).
//! - flag-name lines (five or more leading tabs: the `device_cap_flags` names,
//!   the `general_odp_caps:` list, `Unknown flags: 0x..`) are the `flags` of
//!   the entry before them.
//! - a line without `:` (`core clock not supported`, a device name in the
//!   `-l` list) is an entry whose key is the whole text and whose value is
//!   empty; it is never nested under a header.
//! - GID lines are entries keyed like `GID[  1]`.
//! - a key repeated within a section gets `#2`, `#3`... (`max_sge#2` is the
//!   tag-matching `max_sge`).
//!
//! [`compare`] matches entries by (section, key) and reports every value that
//! differs, every key only one side printed, and whether the common keys come
//! in the same order.

use std::fmt;

/// One parsed field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `hca_id:rxe0`, `hca_id:rxe0/port:1`, or `""` before any device.
    pub section: String,
    /// The key, qualified by its header and made unique within the section.
    pub key: String,
    /// The text after `key:`, without the separating tabs.
    pub value: String,
    /// The flag-name lines under the key, in order.
    pub flags: Vec<String>,
}

impl Entry {
    /// The value and flags as one string, for reports.
    pub fn display_value(&self) -> String {
        if self.flags.is_empty() {
            format!("{:?}", self.value)
        } else {
            format!("{:?} [{}]", self.value, self.flags.join(", "))
        }
    }
}

/// The number of leading tabs from which a line is a flag name.
const FLAG_INDENT: usize = 5;

/// Parses `ibv_devinfo [-v] [-l]` output.
pub fn parse(text: &str) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut device = String::new();
    let mut section = String::new();
    // The last key with an empty value, and its indentation.
    let mut header: Option<(usize, String)> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start_matches('\t').len();
        let body = line.trim_start_matches('\t').trim_end();
        if indent >= FLAG_INDENT {
            match entries.last_mut() {
                Some(last) => last.flags.push(body.trim().to_string()),
                // A flag with nothing before it: keep it visible.
                None => entries.push(entry(&section, body, "")),
            }
            continue;
        }
        let (key, value) = match body.split_once(':') {
            Some((k, v)) => (k.trim(), v.trim_matches(|c| c == '\t' || c == ' ')),
            None => (body.trim(), ""),
        };
        if indent == 0 && key == "hca_id" {
            device = format!("hca_id:{value}");
            section = device.clone();
            header = None;
            continue;
        }
        if key == "port" && !device.is_empty() && value.parse::<u32>().is_ok() {
            section = format!("{device}/port:{value}");
            header = None;
            continue;
        }
        let has_colon = body.contains(':');
        let is_header = has_colon && value.is_empty();
        let qualified = match &header {
            Some((h_indent, h_key)) if has_colon && indent > *h_indent => format!("{h_key}/{key}"),
            _ => {
                header = None;
                key.to_string()
            }
        };
        if is_header && header.is_none() {
            header = Some((indent, key.to_string()));
        }
        let unique = unique_key(&entries, &section, &qualified);
        entries.push(entry(&section, &unique, value));
    }
    entries
}

fn entry(section: &str, key: &str, value: &str) -> Entry {
    Entry {
        section: section.to_string(),
        key: key.to_string(),
        value: value.to_string(),
        flags: Vec::new(),
    }
}

/// `key`, or `key#n` when the section already has it n-1 times.
fn unique_key(entries: &[Entry], section: &str, key: &str) -> String {
    let seen = entries
        .iter()
        .filter(|e| e.section == section && (e.key == key || e.key.starts_with(&format!("{key}#"))))
        .count();
    if seen == 0 {
        key.to_string()
    } else {
        format!("{key}#{}", seen + 1)
    }
}

/// A key both sides printed with different values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub section: String,
    pub key: String,
    pub expected: String,
    pub actual: String,
}

/// The result of [`compare`]: `expected` is the reference (rdma-core's
/// `ibv_devinfo`), `actual` ours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Keys printed by both, with different values or flags.
    pub differences: Vec<Difference>,
    /// `(section, key)` printed only by the reference.
    pub only_expected: Vec<(String, String)>,
    /// `(section, key)` printed only by us.
    pub only_actual: Vec<(String, String)>,
    /// The first place where the common keys come in a different order:
    /// `(position, expected key, actual key)`, keys as `section key`.
    pub order: Option<(usize, String, String)>,
}

impl Comparison {
    /// No difference of any kind.
    pub fn is_identical(&self) -> bool {
        self.differences.is_empty()
            && self.only_expected.is_empty()
            && self.only_actual.is_empty()
            && self.order.is_none()
    }

    /// Fails unless the only keys missing from `actual` are in `allowed_missing`
    /// (matched against the key, ignoring a `#n` suffix) and nothing else differs.
    /// Keys we print that the reference does not are always failures.
    pub fn check(&self, allowed_missing: &[&str]) -> Result<(), String> {
        let missing: Vec<&(String, String)> = self
            .only_expected
            .iter()
            .filter(|(_, k)| !allowed_missing.contains(&k.split('#').next().unwrap_or(k)))
            .collect();
        if self.differences.is_empty()
            && missing.is_empty()
            && self.only_actual.is_empty()
            && self.order.is_none()
        {
            return Ok(());
        }
        let mut report = self.to_string();
        if !allowed_missing.is_empty() {
            report.push_str(&format!("(allowed missing keys: {allowed_missing:?})\n"));
        }
        Err(report)
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.differences {
            writeln!(
                f,
                "differs: [{}] {}: expected {} got {}",
                d.section, d.key, d.expected, d.actual
            )?;
        }
        for (s, k) in &self.only_expected {
            writeln!(f, "missing: [{s}] {k} (printed only by the reference)")?;
        }
        for (s, k) in &self.only_actual {
            writeln!(f, "extra:   [{s}] {k} (printed only by us)")?;
        }
        if let Some((i, e, a)) = &self.order {
            writeln!(
                f,
                "order:   common key #{i} is {e} in the reference but {a} in ours"
            )?;
        }
        Ok(())
    }
}

/// Compares two parses by (section, key).
pub fn compare(expected: &[Entry], actual: &[Entry]) -> Comparison {
    let find = |list: &[Entry], e: &Entry| -> Option<usize> {
        list.iter()
            .position(|x| x.section == e.section && x.key == e.key)
    };
    let mut c = Comparison::default();
    for e in expected {
        match find(actual, e) {
            Some(i) => {
                let a = &actual[i];
                if a.value != e.value || a.flags != e.flags {
                    c.differences.push(Difference {
                        section: e.section.clone(),
                        key: e.key.clone(),
                        expected: e.display_value(),
                        actual: a.display_value(),
                    });
                }
            }
            None => c.only_expected.push((e.section.clone(), e.key.clone())),
        }
    }
    for a in actual {
        if find(expected, a).is_none() {
            c.only_actual.push((a.section.clone(), a.key.clone()));
        }
    }
    let name = |e: &Entry| format!("[{}] {}", e.section, e.key);
    let common_e: Vec<String> = expected
        .iter()
        .filter(|e| find(actual, e).is_some())
        .map(name)
        .collect();
    let common_a: Vec<String> = actual
        .iter()
        .filter(|a| find(expected, a).is_some())
        .map(name)
        .collect();
    c.order = common_e
        .iter()
        .zip(&common_a)
        .enumerate()
        .find(|(_, (e, a))| e != a)
        .map(|(i, (e, a))| (i, e.clone(), a.clone()));
    c
}

/// The first line where two texts differ: `(line number from 1, expected, actual)`.
pub fn first_line_difference(expected: &str, actual: &str) -> Option<(usize, String, String)> {
    let (mut e, mut a) = (expected.split('\n'), actual.split('\n'));
    let mut n = 0;
    loop {
        n += 1;
        match (e.next(), a.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => {
                let show =
                    |l: Option<&str>| l.map_or("<end of output>".to_string(), |l| format!("{l:?}"));
                return Some((n, show(x), show(y)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rdma-core 44's `ibv_devinfo -v` for rxe0, shortened.
    const RXE_VERBOSE: &str = "hca_id:\trxe0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t0.0.0
\tnode_guid:\t\t\t5054:00ff:fe12:3456
\tphys_port_cnt:\t\t\t1
\tmax_qp:\t\t\t\t1048560
\tdevice_cap_flags:\t\t0x01223c76
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tMEM_WINDOW_TYPE_2B
\tmax_sge:\t\t\t32
\tgeneral_odp_caps:
\trc_odp_caps:
\t\t\t\t\tNO SUPPORT
\tcompletion_timestamp_mask not supported
\tdevice_cap_flags_ex:\t\t0x1223C76
\ttso_caps:
\t\tmax_tso:\t\t\t0
\trss_caps:
\t\tmax_rwq_indirection_tables:\t\t\t0
\t\tsupported_qp:
\t\t\t\t\tSUPPORT_UD
\tmax_wq_type_rq:\t\t\t0
\tpacket_pacing_caps:
\t\tqp_rate_limit_min:\t0kbps
\tmax_rndv_hdr_size:\t\t64
\tmax_sge:\t\t\t1
\tflags:
\t\t\t\t\tIBV_TM_CAP_RC

\tcq moderation caps:
\t\tmax_cq_count:\t65535
\t\tmax_cq_period:\t4095 us

\tnum_comp_vectors:\t\t2
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tlink_layer:\t\tEthernet
\t\t\tGID[  0]:\t\tfe80::5054:ff:fe12:3456, RoCE v2
\t\t\tGID[  1]:\t\t::ffff:192.0.2.1, RoCE v2

";

    fn keys(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| format!("{}|{}", e.section, e.key))
            .collect()
    }

    #[test]
    fn parses_sections_keys_headers_flags_and_gids() {
        let p = parse(RXE_VERBOSE);
        let dev = "hca_id:rxe0";
        let port = "hca_id:rxe0/port:1";
        let get = |s: &str, k: &str| {
            p.iter()
                .find(|e| e.section == s && e.key == k)
                .unwrap_or_else(|| panic!("no [{s}] {k} in {:#?}", keys(&p)))
        };
        assert_eq!(get(dev, "transport").value, "InfiniBand (0)");
        assert_eq!(get(dev, "node_guid").value, "5054:00ff:fe12:3456");
        let caps = get(dev, "device_cap_flags");
        assert_eq!(caps.value, "0x01223c76");
        assert_eq!(caps.flags, ["BAD_PKEY_CNTR", "MEM_WINDOW_TYPE_2B"]);
        assert_eq!(get(dev, "general_odp_caps").flags, Vec::<String>::new());
        assert_eq!(get(dev, "rc_odp_caps").flags, ["NO SUPPORT"]);
        assert_eq!(
            get(dev, "completion_timestamp_mask not supported").value,
            ""
        );
        assert_eq!(get(dev, "tso_caps/max_tso").value, "0");
        assert_eq!(get(dev, "rss_caps/supported_qp").flags, ["SUPPORT_UD"]);
        assert_eq!(
            get(dev, "max_wq_type_rq").value,
            "0",
            "a 1-tab key ends the header"
        );
        assert_eq!(
            get(dev, "packet_pacing_caps/qp_rate_limit_min").value,
            "0kbps"
        );
        assert_eq!(get(dev, "max_sge").value, "32");
        assert_eq!(get(dev, "max_sge#2").value, "1");
        assert_eq!(get(dev, "flags").flags, ["IBV_TM_CAP_RC"]);
        assert_eq!(
            get(dev, "cq moderation caps/max_cq_period").value,
            "4095 us"
        );
        assert_eq!(get(dev, "num_comp_vectors").value, "2");
        assert_eq!(get(port, "state").value, "PORT_ACTIVE (4)");
        assert_eq!(get(port, "GID[  1]").value, "::ffff:192.0.2.1, RoCE v2");
        assert_eq!(
            get(port, "GID[  0]").value,
            "fe80::5054:ff:fe12:3456, RoCE v2"
        );
        assert_eq!(p.len(), 30, "{:#?}", keys(&p));
    }

    #[test]
    fn parses_the_device_list() {
        let p = parse("2 HCAs found:\n\tmlx5_0\n\trxe0\n\n");
        assert_eq!(keys(&p), ["|2 HCAs found", "|mlx5_0", "|rxe0"]);
    }

    #[test]
    fn identical_outputs_compare_equal() {
        let c = compare(&parse(RXE_VERBOSE), &parse(RXE_VERBOSE));
        assert!(c.is_identical(), "{c}");
        assert_eq!(c.check(&[]), Ok(()));
        assert_eq!(first_line_difference(RXE_VERBOSE, RXE_VERBOSE), None);
    }

    #[test]
    fn tab_layout_is_not_a_field_difference_but_is_a_line_difference() {
        let ours = RXE_VERBOSE.replace("\tmax_qp:\t\t\t\t", "\tmax_qp:\t");
        assert!(compare(&parse(RXE_VERBOSE), &parse(&ours)).is_identical());
        let (line, e, a) = first_line_difference(RXE_VERBOSE, &ours).unwrap();
        assert_eq!(line, 6);
        assert_eq!(
            (e.as_str(), a.as_str()),
            (
                "\"\\tmax_qp:\\t\\t\\t\\t1048560\"",
                "\"\\tmax_qp:\\t1048560\""
            )
        );
    }

    #[test]
    fn reports_every_difference_at_once() {
        let ours = RXE_VERBOSE
            .replace("1048560", "1048576")
            .replace("\t\t\t\t\tMEM_WINDOW_TYPE_2B\n", "")
            .replace("::ffff:192.0.2.1, RoCE v2", "::ffff:192.0.2.2, RoCE v2")
            .replace("\t\tmax_tso:\t\t\t0\n", "")
            .replace(
                "\tnum_comp_vectors:\t\t2\n",
                "\tnum_comp_vectors:\t\t2\n\tboard_id:\t\t\tX\n",
            );
        let c = compare(&parse(RXE_VERBOSE), &parse(&ours));
        let diffs: Vec<(&str, &str)> = c
            .differences
            .iter()
            .map(|d| (d.section.as_str(), d.key.as_str()))
            .collect();
        assert_eq!(
            diffs,
            [
                ("hca_id:rxe0", "max_qp"),
                ("hca_id:rxe0", "device_cap_flags"),
                ("hca_id:rxe0/port:1", "GID[  1]")
            ]
        );
        assert_eq!(c.differences[0].expected, "\"1048560\"");
        assert_eq!(c.differences[0].actual, "\"1048576\"");
        assert_eq!(c.differences[1].actual, "\"0x01223c76\" [BAD_PKEY_CNTR]");
        assert_eq!(
            c.only_expected,
            [("hca_id:rxe0".to_string(), "tso_caps/max_tso".to_string())]
        );
        assert_eq!(
            c.only_actual,
            [("hca_id:rxe0".to_string(), "board_id".to_string())]
        );
        let report = c.check(&[]).unwrap_err();
        for needle in [
            "max_qp",
            "device_cap_flags",
            "GID[  1]",
            "192.0.2.2",
            "tso_caps/max_tso",
            "board_id",
        ] {
            assert!(report.contains(needle), "{needle} not in\n{report}");
        }
        // Allowing the missing key does not excuse the rest.
        assert!(c.check(&["tso_caps/max_tso"]).is_err());
    }

    #[test]
    fn allow_list_covers_only_missing_keys() {
        let ours = RXE_VERBOSE.replace("\t\tmax_tso:\t\t\t0\n", "");
        let c = compare(&parse(RXE_VERBOSE), &parse(&ours));
        assert!(c.check(&[]).is_err());
        assert_eq!(c.check(&["tso_caps/max_tso"]), Ok(()));
    }

    #[test]
    fn reports_reordered_keys() {
        let ours = RXE_VERBOSE.replace(
            "\tfw_ver:\t\t\t\t0.0.0\n\tnode_guid:\t\t\t5054:00ff:fe12:3456\n",
            "\tnode_guid:\t\t\t5054:00ff:fe12:3456\n\tfw_ver:\t\t\t\t0.0.0\n",
        );
        let c = compare(&parse(RXE_VERBOSE), &parse(&ours));
        assert!(c.differences.is_empty() && c.only_actual.is_empty() && c.only_expected.is_empty());
        let (i, e, a) = c.order.clone().expect("order difference");
        assert_eq!(
            (i, e.as_str(), a.as_str()),
            (1, "[hca_id:rxe0] fw_ver", "[hca_id:rxe0] node_guid")
        );
        assert!(c.check(&[]).is_err());
    }

    #[test]
    fn ports_of_two_devices_do_not_collide() {
        let two = format!("{RXE_VERBOSE}{}", RXE_VERBOSE.replace("rxe0", "rxe1"));
        let other = two
            .replacen("PORT_ACTIVE (4)", "PORT_DOWN (1)", 2)
            .replacen("PORT_DOWN (1)", "PORT_ACTIVE (4)", 1);
        let c = compare(&parse(&two), &parse(&other));
        assert_eq!(c.differences.len(), 1, "{c}");
        assert_eq!(c.differences[0].section, "hca_id:rxe1/port:1");
    }
}
