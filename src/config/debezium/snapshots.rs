//! Debezium's snapshot controls and notification channels, whose values
//! span several properties: `snapshot.select.statement.overrides` lists
//! tables whose statements are `snapshot.select.statement.overrides.<schema>.<table>`;
//! `notification.enabled.channels` and `signal.enabled.channels` are lists
//! of which `jmx` (and `file`) have no counterpart here.

use std::collections::BTreeMap;

use super::Mapping;

const OVERRIDES: &str = "snapshot.select.statement.overrides";

/// Maps the select overrides and the notification channels.
pub(super) fn map_snapshot_controls(properties: &BTreeMap<String, String>, mapping: &mut Mapping) {
    let listed: Vec<&str> = properties
        .get(OVERRIDES)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .collect()
        })
        .unwrap_or_default();
    for table in &listed {
        let property = format!("{OVERRIDES}.{table}");
        match properties.get(&property) {
            // The flag takes one statement per line.
            Some(select) => mapping.set(
                "snapshot_select_statement_override",
                format!(
                    "{table}={}",
                    select.split_whitespace().collect::<Vec<_>>().join(" ")
                ),
                &property,
            ),
            None => mapping.reject(
                OVERRIDES,
                table,
                format!("lists {table} but {property} is not set: give its SELECT statement"),
            ),
        }
    }
    for (property, value) in properties.range(format!("{OVERRIDES}.")..) {
        let Some(table) = property.strip_prefix(&format!("{OVERRIDES}.")) else {
            break;
        };
        if !listed.contains(&table) {
            mapping.reject(
                property,
                value,
                format!("{table} is not listed in {OVERRIDES}, so Debezium would not use it; add it there"),
            );
        }
    }
    if let Some(channels) = properties.get("signal.enabled.channels") {
        for channel in channels.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            match channel {
                "source" | "kafka" => mapping.set(
                    "signal_enabled_channels",
                    channel,
                    "signal.enabled.channels",
                ),
                other => mapping.reject(
                    "signal.enabled.channels",
                    other,
                    "only the source and kafka signal channels exist here",
                ),
            }
        }
    }
    if let Some(channels) = properties.get("notification.enabled.channels") {
        for channel in channels.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            match channel {
                "sink" | "log" => mapping.set(
                    "notification_enabled_channels",
                    channel,
                    "notification.enabled.channels",
                ),
                other => mapping.reject(
                    "notification.enabled.channels",
                    other,
                    "only the sink and log channels exist here (JMX is Java's; the notifications are counted in the Prometheus metrics instead)",
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::map;

    #[test]
    fn overrides_and_channels_become_flags() {
        let properties = [
            (super::OVERRIDES, "public.orders, public.lines"),
            (
                "snapshot.select.statement.overrides.public.orders",
                "SELECT * FROM public.orders\n WHERE id > 2",
            ),
            (
                "snapshot.select.statement.overrides.public.lines",
                "SELECT * FROM public.lines WHERE qty > 0",
            ),
            (
                "snapshot.select.statement.overrides.public.other",
                "SELECT 1",
            ),
            ("snapshot.include.collection.list", "public.orders"),
            ("notification.enabled.channels", "sink,log,jmx"),
            ("notification.sink.topic.name", "app.notifications"),
            ("signal.enabled.channels", "source,kafka"),
            ("signal.kafka.topic", "app-signal"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let m = map(&properties);
        let values = |key: &str| -> Vec<&str> {
            m.mapped
                .iter()
                .filter(|x| x.key == key)
                .map(|x| x.value.as_str())
                .collect()
        };
        assert_eq!(
            values("snapshot_select_statement_override"),
            [
                "public.orders=SELECT * FROM public.orders WHERE id > 2",
                "public.lines=SELECT * FROM public.lines WHERE qty > 0"
            ]
        );
        assert_eq!(
            values("snapshot_include_collection_list"),
            ["public.orders"]
        );
        assert_eq!(values("notification_enabled_channels"), ["sink", "log"]);
        assert_eq!(
            values("notification_sink_topic_name"),
            ["app.notifications"]
        );
        let mut rejected: Vec<&str> = m.rejected.iter().map(|r| r.property.as_str()).collect();
        rejected.sort_unstable();
        assert_eq!(
            rejected,
            [
                "notification.enabled.channels",
                "snapshot.select.statement.overrides.public.other"
            ],
            "{:?}",
            m.rejected
        );
    }
}
