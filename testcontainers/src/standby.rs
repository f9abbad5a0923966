//! A physical streaming standby of a local [`Postgres`], made without
//! `pg_basebackup` (the npm builds of other versions ship only `initdb`,
//! `pg_ctl` and `postgres`, and Debian's `pg_basebackup` 15 refuses a newer
//! server), so it works with any version this crate runs.
//!
//! The base backup is PostgreSQL's low-level API over SQL
//! ([docs](https://www.postgresql.org/docs/current/continuous-archiving.html#BACKUP-LOWLEVEL-BASE-BACKUP)):
//! a physical slot on the primary (reserving WAL from now, so nothing the
//! standby needs is recycled), `pg_backup_start` (`pg_start_backup` before
//! 15), a copy of the data dir without what `pg_basebackup` leaves out,
//! `pg_backup_stop` on the same session, whose label file becomes the
//! copy's `backup_label`. Then `standby.signal` and, in
//! `postgresql.auto.conf`, its own port and socket dir, `primary_conninfo`
//! (with a `dbname`, which slot synchronization needs),
//! `primary_slot_name` and `hot_standby_feedback = on`.

use std::fs;
use std::path::Path;

use tokio_postgres::{NoTls, SimpleQueryMessage};

use crate::postgres::{run_as, server_launch, USER};
use crate::process::{self, block_on, Local};
use crate::runner::Runner;
use crate::{unique_name, Error, Postgres, Result, StandbyOptions};

/// Top-level entries of the data dir whose contents a base backup leaves
/// out (the dirs themselves are made empty), as `pg_basebackup` does.
const EMPTIED: &[&str] = &[
    "pg_wal",
    "pg_replslot",
    "pg_stat_tmp",
    "pg_dynshmem",
    "pg_notify",
    "pg_serial",
    "pg_snapshots",
    "pg_subtrans",
];
/// Files a base backup leaves out.
const SKIPPED: &[&str] = &[
    "postmaster.pid",
    "postmaster.opts",
    "backup_label",
    "standby.signal",
];

impl Postgres {
    /// Starts a hot standby of `primary` (local backend), streaming from it
    /// through a new physical slot ([`physical_slot`](Self::physical_slot)),
    /// and waits until it accepts queries.
    pub fn launch_standby_of(primary: &Postgres, options: &StandbyOptions) -> Result<Postgres> {
        let (Some(bindir), Some(primary_data)) = (primary.bindir.clone(), primary.data_dir())
        else {
            return Err(Error::LocalOnly {
                what: "a standby (it copies the primary's data dir)",
            });
        };
        let slot = unique_name("standby");
        primary.execute(
            "postgres",
            &format!("SELECT pg_create_physical_replication_slot('{slot}', true)"),
        )?;
        let standby = process::with_work_dir("postgres", |work| {
            let owner = run_as()?;
            let data = work.join("data");
            base_backup(primary, primary_data, &data)?;
            let port = process::free_port()?;
            let mut conf = format!(
                "\n# pgcdc-testcontainers standby\nport = {port}\nunix_socket_directories = '{}'\n\
                 primary_conninfo = 'host=127.0.0.1 port={} user={USER} dbname=postgres application_name={slot}'\n\
                 primary_slot_name = '{slot}'\nhot_standby = on\nhot_standby_feedback = on\n",
                work.display(),
                primary.port(),
            );
            if options.sync_replication_slots {
                conf += "sync_replication_slots = on\n";
            }
            for (name, value) in &options.settings {
                conf += &format!("{name} = '{value}'\n");
            }
            let auto_conf = data.join("postgresql.auto.conf");
            let mut text = fs::read_to_string(&auto_conf).unwrap_or_default();
            text += &conf;
            fs::write(&auto_conf, text)
                .map_err(Error::io(format!("write {}", auto_conf.display())))?;
            let signal = data.join("standby.signal");
            fs::write(&signal, "").map_err(Error::io(format!("write {}", signal.display())))?;
            if let Some((uid, gid)) = owner {
                process::run(
                    std::process::Command::new("chown")
                        .arg("-R")
                        .arg(format!("{uid}:{gid}"))
                        .arg(work),
                    "chown the standby's work dir to the postgres user",
                )?;
            }
            Ok(Postgres {
                runner: Runner::Local(Local::new(server_launch(owner, &bindir, &data, work))),
                port,
                data_dir: Some(data),
                bindir: Some(bindir.clone()),
                physical_slot: Some(slot.clone()),
            })
        })?;
        standby.start()?;
        Ok(standby)
    }

    /// A standby's physical slot on its primary (for the primary's
    /// `synchronized_standby_slots`); `None` for a primary.
    pub fn physical_slot(&self) -> Option<&str> {
        self.physical_slot.as_deref()
    }

    /// Promotes a standby to a primary (`pg_promote`) and waits until it
    /// accepts writes.
    pub fn promote(&self) -> Result<()> {
        let promoted = self.query("postgres", "SELECT pg_promote(true, 60)")?;
        match promoted.first().and_then(|r| r.first()).cloned().flatten() {
            Some(t) if t == "t" || t == "true" => Ok(()),
            other => Err(Error::Io {
                action: format!("promote the standby on port {}", self.port()),
                source: std::io::Error::other(format!("pg_promote returned {other:?}")),
            }),
        }
    }

    /// `ALTER SYSTEM SET name = 'value'`, then a configuration reload.
    pub fn alter_system(&self, name: &str, value: &str) -> Result<()> {
        let value = value.replace('\'', "''");
        self.execute("postgres", &format!("ALTER SYSTEM SET {name} = '{value}'"))?;
        self.execute("postgres", "SELECT pg_reload_conf()")
    }

    /// The server's `server_version_num`, e.g. 170010.
    pub fn version_num(&self) -> Result<u32> {
        let rows = self.query("postgres", "SHOW server_version_num")?;
        rows.first()
            .and_then(|r| r.first())
            .cloned()
            .flatten()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Io {
                action: "read server_version_num".into(),
                source: std::io::Error::other("no number"),
            })
    }
}

/// Copies `source` (the primary's data dir) into `target` between
/// `pg_backup_start` and `pg_backup_stop` on one session of `primary`, and
/// writes the label file `pg_backup_stop` returns.
fn base_backup(primary: &Postgres, source: &Path, target: &Path) -> Result<()> {
    let url = primary.url("postgres");
    let pg_err = |source| Error::Postgres {
        database: "postgres".into(),
        source,
    };
    block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.map_err(pg_err)?;
        let connection = tokio::spawn(connection);
        let version: u32 = client
            .query_one("SHOW server_version_num", &[])
            .await
            .map_err(pg_err)?
            .get::<_, String>(0)
            .parse()
            .unwrap_or(0);
        let (start, stop) = if version >= 150_000 {
            (
                "SELECT pg_backup_start('pgcdc-standby', true)",
                "SELECT labelfile, spcmapfile FROM pg_backup_stop(true)",
            )
        } else {
            (
                "SELECT pg_start_backup('pgcdc-standby', true, false)",
                "SELECT labelfile, spcmapfile FROM pg_stop_backup(false, true)",
            )
        };
        client.simple_query(start).await.map_err(pg_err)?;
        copy_dir(source, target, true)?;
        let rows = client.simple_query(stop).await.map_err(pg_err)?;
        let (label, map) = rows
            .iter()
            .find_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some((
                    row.get(0).unwrap_or_default().to_owned(),
                    row.get(1).unwrap_or_default().to_owned(),
                )),
                _ => None,
            })
            .ok_or_else(|| Error::Io {
                action: "read pg_backup_stop's label file".into(),
                source: std::io::Error::other("no row"),
            })?;
        drop(client);
        let _ = connection.await;
        let write = |name: &str, text: &str| {
            let path = target.join(name);
            fs::write(&path, text).map_err(Error::io(format!("write {}", path.display())))
        };
        write("backup_label", &label)?;
        if !map.is_empty() {
            write("tablespace_map", &map)?;
        }
        Ok(())
    })?
}

/// Copies the dir `source` into a new dir `target` (mode 0700); at the top
/// level, leaves out [`SKIPPED`] and the contents of [`EMPTIED`]. A file
/// that vanishes while copying (the server runs) is skipped.
fn copy_dir(source: &Path, target: &Path, top: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir(target).map_err(Error::io(format!("create dir {}", target.display())))?;
    fs::set_permissions(target, fs::Permissions::from_mode(0o700))
        .map_err(Error::io(format!("chmod {}", target.display())))?;
    let entries =
        fs::read_dir(source).map_err(Error::io(format!("read dir {}", source.display())))?;
    for entry in entries {
        let entry = entry.map_err(Error::io(format!("read dir {}", source.display())))?;
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        if top && SKIPPED.contains(&name_text.as_ref()) {
            continue;
        }
        let (from, to) = (entry.path(), target.join(&name));
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if top && EMPTIED.contains(&name_text.as_ref()) {
                fs::create_dir(&to).map_err(Error::io(format!("create dir {}", to.display())))?;
                fs::set_permissions(&to, fs::Permissions::from_mode(0o700))
                    .map_err(Error::io(format!("chmod {}", to.display())))?;
                if name_text == "pg_wal" {
                    let status = to.join("archive_status");
                    fs::create_dir(&status)
                        .map_err(Error::io(format!("create dir {}", status.display())))?;
                }
                continue;
            }
            copy_dir(&from, &to, false)?;
        } else if kind.is_file() {
            match fs::copy(&from, &to) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("copy {}", from.display()))(e)),
            }
        }
    }
    Ok(())
}
