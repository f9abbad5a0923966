//! What the fleet is doing: each instance reports its pipelines' states
//! to the compacted status topic (key = pipeline, as Kafka Connect's
//! `status.storage.topic`), and `fleet status` joins them with the configs
//! and with the consumer group's current assignment (which partition, so
//! which pipeline, each member owns).

use serde::{Deserialize, Serialize};

use super::{FleetError, FleetKafka, FleetName};

/// A pipeline's state as its instance last reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRecord {
    /// The reporting instance's client id.
    pub instance: String,
    /// `running`, `waiting_for_slot`, `stopped`, `failed` or `finished`.
    pub state: String,
    /// The error, when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When (milliseconds since the epoch).
    pub at_ms: u64,
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One member of the fleet's group and the partitions it owns.
#[derive(Debug, Clone, Serialize)]
pub struct Owner {
    pub client_id: String,
    pub host: String,
    pub partitions: Vec<i32>,
}

/// The group's members with their assignments, as the coordinator knows
/// them (empty while a rebalance is in progress or when no instance runs).
pub fn owners(kafka: &FleetKafka, fleet: &FleetName) -> Result<Vec<Owner>, FleetError> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let group = fleet.group();
    let probe: BaseConsumer = kafka
        .client("pgcdc-fleet-admin")
        .create()
        .map_err(FleetError::Client)?;
    let list = probe
        .fetch_group_list(Some(&group), super::REQUEST_TIMEOUT)
        .map_err(|error| FleetError::Group {
            group: group.clone(),
            error,
        })?;
    let topic = fleet.assignment_topic();
    let mut owners = Vec::new();
    for info in list.groups().iter().filter(|g| g.name() == group) {
        for member in info.members() {
            let partitions = member
                .assignment()
                .map(|bytes| assigned_partitions(bytes, &topic))
                .unwrap_or_default();
            owners.push(Owner {
                client_id: member.client_id().to_owned(),
                host: member.client_host().to_owned(),
                partitions,
            });
        }
    }
    Ok(owners)
}

/// The partitions of `topic` in a consumer protocol assignment
/// (`ConsumerProtocolAssignment`: version i16, then an array of topic
/// name and partition array, big-endian); nothing when it does not parse.
pub fn assigned_partitions(bytes: &[u8], topic: &str) -> Vec<i32> {
    let mut reader = Reader(bytes);
    let mut out = Vec::new();
    let parsed = (|| {
        reader.i16()?;
        let topics = reader.i32()?;
        for _ in 0..topics {
            let name = reader.string()?;
            let count = reader.i32()?;
            for _ in 0..count {
                let p = reader.i32()?;
                if name == topic {
                    out.push(p);
                }
            }
        }
        Some(())
    })();
    if parsed.is_none() {
        out.clear();
    }
    out.sort_unstable();
    out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take::<2>().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take::<4>().map(i32::from_be_bytes)
    }
    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        let bytes = self.0.get(..len)?;
        self.0 = self.0.get(len..)?;
        String::from_utf8(bytes.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(topics: &[(&str, &[i32])]) -> Vec<u8> {
        let mut b = 1i16.to_be_bytes().to_vec();
        b.extend(i32::try_from(topics.len()).expect("small").to_be_bytes());
        for (name, parts) in topics {
            b.extend(i16::try_from(name.len()).expect("small").to_be_bytes());
            b.extend(name.as_bytes());
            b.extend(i32::try_from(parts.len()).expect("small").to_be_bytes());
            for p in *parts {
                b.extend(p.to_be_bytes());
            }
        }
        b.extend((-1i32).to_be_bytes());
        b
    }

    #[test]
    fn assignments_are_read_from_the_consumer_protocol() {
        let bytes = assignment(&[("other", &[0]), ("a.assignment", &[4, 1])]);
        assert_eq!(assigned_partitions(&bytes, "a.assignment"), [1, 4]);
        assert!(assigned_partitions(&bytes[..9], "a.assignment").is_empty());
        assert!(assigned_partitions(&[], "a.assignment").is_empty());
    }
}
