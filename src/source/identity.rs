//! Which server the connector streams from, and whether it may go on after
//! a reconnect lands somewhere else.
//!
//! An LSN means something only within one cluster's history. A run keeps
//! the [`ServerIdentity`] (`IDENTIFY_SYSTEM`'s `systemid` and `timeline`)
//! of the server its first attempt reached, and every later attempt
//! compares before it looks at the slot ([`judge`], sans-IO):
//!
//! - **Same cluster, same timeline**: carry on from the slot.
//! - **Another cluster** (another `system_identifier`: the URL or the DNS
//!   name behind it now points elsewhere, or the database was restored or
//!   upgraded into a new cluster): stop. Its WAL positions and its slot of
//!   the same name have nothing to do with what was streamed.
//! - **Same cluster, later timeline**: a standby was promoted (a physical
//!   standby shares its primary's `system_identifier`). The new timeline's
//!   history ([`TIMELINE_HISTORY`](https://www.postgresql.org/docs/current/protocol-replication.html))
//!   says where the old one ended, the switch point. Going on is safe only
//!   when the slot came along (a failover slot synchronized to the standby,
//!   PostgreSQL 17+) **and** everything this run acknowledged lies at or
//!   before the switch point: the new primary then has all of it, and
//!   resuming at the acknowledged position re-reads nothing twice that
//!   Kafka holds and skips nothing of the new timeline. A slot behind what
//!   was delivered is expected (synchronization trails the primary); its
//!   window is replayed and the usual skipping of delivered records applies.
//!   A missing slot (no synchronization: its progress died with the old
//!   primary), or an acknowledged position past the switch point (the new
//!   primary lost transactions Kafka may hold, and positions past the
//!   switch point name other WAL), stops the run.
//! - A timeline that does not descend from the known one (a restore of an
//!   older backup) stops it too.
//!
//! Stopping is the point: never a silent new snapshot, never a silent gap.
//! Each error names what happened and the operator's choices. The identity
//! lives in the run's memory (across reconnects of one process) and, under
//! exactly-once, in every progress record, which a restarted process judges
//! the same way before it skips anything by the record's position. Under
//! at-least-once a restart of the process is how an operator accepts a new
//! server, after which the slot and `--snapshot-mode` decide as on any start
//! (a missing slot with topics already written stops under `--snapshot-mode
//! initial`); under exactly-once, deleting the progress record (a tombstone
//! for the connector's key) is.

use crate::lsn::Lsn;
use crate::source::replication::{ReplicationConfig, ReplicationError, Session};

pub use crate::source::replication::ServerIdentity;

/// What a reconnect found, read off a replication session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub identity: ServerIdentity,
    /// `(timeline, switch point)` of every timeline before the current one.
    pub history: Vec<(u32, Lsn)>,
}

/// Connects a replication session as `config` says and reads the server's
/// identity and timeline history.
pub async fn observe(config: &ReplicationConfig) -> Result<Observed, ReplicationError> {
    let mut session = Session::connect(config).await?;
    let (identity, _) = session.identify().await?;
    let history = session.timeline_history(identity.timeline).await?;
    Ok(Observed { identity, history })
}

/// What the run knew when it reconnected.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// The identity of the server the run streamed from, if it got that far.
    pub identity: Option<ServerIdentity>,
    /// Everything before this was acknowledged by Kafka in this run.
    pub acknowledged: Lsn,
    /// The slot's name, and whether the server has it.
    pub slot: &'a str,
    pub slot_exists: bool,
}

/// Whether streaming may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first server this run reached.
    First,
    /// The server of the last attempt (or a restart of it).
    Same,
    /// A promoted standby that carries the slot and everything acknowledged.
    FollowedFailover {
        from_timeline: u32,
        to_timeline: u32,
        switch: Lsn,
    },
}

/// Stops: the server is not one this run may go on streaming from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("--pg-url now reaches another PostgreSQL cluster (system identifier {now}; what was streamed so far came from {was}): its WAL positions and its replication slot {slot:?} have nothing to do with what was streamed, so going on would skip or repeat changes; not continuing. If --pg-url (or the name behind it) moved by mistake, point it back; if the database moved to this cluster on purpose (a restore, pg_upgrade), restart the connector to accept it: it then starts from this cluster's slot, or as --snapshot-mode says when there is none")]
    OtherCluster { was: u64, now: u64, slot: String },
    #[error("the server is a promoted standby (timeline {from_timeline} ended at {switch}, it is on timeline {to_timeline}) without replication slot {slot:?}: the slot's progress was lost with the old primary, and changes committed since the failover would be missed; not continuing. Choices: restart with --snapshot-mode when_needed to take a new snapshot, or with --snapshot-mode never to accept the gap (a new slot streams from now on). So that the next failover keeps the slot: PostgreSQL 17+, --slot-failover, and sync_replication_slots on the standby (pgcdc-kafka check lists what is missing)")]
    SlotNotCarried {
        slot: String,
        from_timeline: u32,
        to_timeline: u32,
        switch: Lsn,
    },
    #[error("the server is a promoted standby whose history left timeline {from_timeline} at {switch}, before {acknowledged}, up to which this run had already delivered to Kafka: transactions between the two may be in Kafka but not in the database (the standby had not received them), and streaming from {acknowledged} would skip the new primary's changes after {switch}; not continuing. Choices: restart the connector to stream from slot {slot:?}'s own position (Kafka keeps the events of the lost transactions), or drop the slot and restart with --snapshot-mode when_needed for a new snapshot. synchronized_standby_slots on the primary prevents this")]
    Diverged {
        slot: String,
        from_timeline: u32,
        to_timeline: u32,
        switch: Lsn,
        acknowledged: Lsn,
    },
    #[error("the server is on timeline {now} whose history does not pass through timeline {was}, which this run streamed from (a restore from an older backup, or another standby's branch): positions of the two do not correspond; not continuing. Point --pg-url back at the server of timeline {was}, or restart the connector to accept this one")]
    ForeignHistory { was: u32, now: u32 },
}

/// Decides whether streaming may go on from `observed`, given what the run
/// `known`; see the module doc for the rules.
///
/// ```
/// use pgcdc_kafka::lsn::Lsn;
/// use pgcdc_kafka::source::identity::{judge, IdentityError, Known, Observed, ServerIdentity, Verdict};
///
/// let before = ServerIdentity { system_identifier: 7, timeline: 1 };
/// let promoted = Observed {
///     identity: ServerIdentity { system_identifier: 7, timeline: 2 },
///     history: vec![(1, "0/5000000".parse().unwrap())],
/// };
/// let known = Known { identity: Some(before), acknowledged: "0/4000000".parse().unwrap(), slot: "s", slot_exists: true };
/// assert!(matches!(judge(&known, &promoted), Ok(Verdict::FollowedFailover { .. })));
/// let lost = Known { slot_exists: false, ..known };
/// assert!(matches!(judge(&lost, &promoted), Err(IdentityError::SlotNotCarried { .. })));
/// ```
pub fn judge(known: &Known<'_>, observed: &Observed) -> Result<Verdict, IdentityError> {
    let Some(was) = known.identity else {
        return Ok(Verdict::First);
    };
    let now = observed.identity;
    if now.system_identifier != was.system_identifier {
        return Err(IdentityError::OtherCluster {
            was: was.system_identifier,
            now: now.system_identifier,
            slot: known.slot.to_owned(),
        });
    }
    if now.timeline == was.timeline {
        return Ok(Verdict::Same);
    }
    let foreign = IdentityError::ForeignHistory {
        was: was.timeline,
        now: now.timeline,
    };
    if now.timeline < was.timeline {
        return Err(foreign);
    }
    // Where the known timeline ended in the new one's history.
    let Some(&(_, switch)) = observed
        .history
        .iter()
        .find(|(timeline, _)| *timeline == was.timeline)
    else {
        return Err(foreign);
    };
    if !known.slot_exists {
        return Err(IdentityError::SlotNotCarried {
            slot: known.slot.to_owned(),
            from_timeline: was.timeline,
            to_timeline: now.timeline,
            switch,
        });
    }
    if known.acknowledged > switch {
        return Err(IdentityError::Diverged {
            slot: known.slot.to_owned(),
            from_timeline: was.timeline,
            to_timeline: now.timeline,
            switch,
            acknowledged: known.acknowledged,
        });
    }
    Ok(Verdict::FollowedFailover {
        from_timeline: was.timeline,
        to_timeline: now.timeline,
        switch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(text: &str) -> Lsn {
        text.parse().expect("lsn")
    }

    fn id(system_identifier: u64, timeline: u32) -> ServerIdentity {
        ServerIdentity {
            system_identifier,
            timeline,
        }
    }

    fn known(
        identity: Option<ServerIdentity>,
        acknowledged: &str,
        slot_exists: bool,
    ) -> Known<'static> {
        Known {
            identity,
            acknowledged: lsn(acknowledged),
            slot: "s",
            slot_exists,
        }
    }

    fn observed(identity: ServerIdentity, history: &[(u32, &str)]) -> Observed {
        Observed {
            identity,
            history: history.iter().map(|(t, l)| (*t, lsn(l))).collect(),
        }
    }

    #[test]
    fn the_first_server_and_the_same_one_go_on() {
        let here = observed(id(1, 1), &[]);
        assert_eq!(judge(&known(None, "0/0", false), &here), Ok(Verdict::First));
        assert_eq!(
            judge(&known(Some(id(1, 1)), "0/9000000", true), &here),
            Ok(Verdict::Same)
        );
        // A slot lost on the same server is the slot check's business.
        assert_eq!(
            judge(&known(Some(id(1, 1)), "0/9000000", false), &here),
            Ok(Verdict::Same)
        );
    }

    #[test]
    fn another_cluster_stops_whatever_its_slot() {
        for slot_exists in [true, false] {
            let verdict = judge(
                &known(Some(id(1, 1)), "0/100", slot_exists),
                &observed(id(2, 1), &[]),
            );
            assert!(
                matches!(
                    verdict,
                    Err(IdentityError::OtherCluster { was: 1, now: 2, .. })
                ),
                "{verdict:?}"
            );
        }
    }

    #[test]
    fn a_failover_goes_on_only_with_the_slot_and_nothing_acknowledged_past_the_switch() {
        let promoted = observed(id(1, 3), &[(1, "0/3000000"), (2, "0/5000000")]);
        assert_eq!(
            judge(&known(Some(id(1, 2)), "0/5000000", true), &promoted),
            Ok(Verdict::FollowedFailover {
                from_timeline: 2,
                to_timeline: 3,
                switch: lsn("0/5000000")
            })
        );
        assert!(matches!(
            judge(&known(Some(id(1, 2)), "0/4000000", false), &promoted),
            Err(IdentityError::SlotNotCarried {
                from_timeline: 2,
                to_timeline: 3,
                ..
            })
        ));
        assert!(matches!(
            judge(&known(Some(id(1, 2)), "0/5000001", true), &promoted),
            Err(IdentityError::Diverged { .. })
        ));
        // Two promotions while the connector was away: timeline 1 ended first.
        assert!(matches!(
            judge(&known(Some(id(1, 1)), "0/2000000", true), &promoted),
            Ok(Verdict::FollowedFailover { switch, .. }) if switch == lsn("0/3000000")
        ));
    }

    #[test]
    fn a_history_without_the_known_timeline_stops() {
        let sibling = observed(id(1, 3), &[(1, "0/3000000")]);
        assert!(matches!(
            judge(&known(Some(id(1, 2)), "0/100", true), &sibling),
            Err(IdentityError::ForeignHistory { was: 2, now: 3 })
        ));
        assert!(matches!(
            judge(
                &known(Some(id(1, 2)), "0/100", true),
                &observed(id(1, 1), &[])
            ),
            Err(IdentityError::ForeignHistory { was: 2, now: 1 })
        ));
    }
}
