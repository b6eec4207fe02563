//! [`LogStore`] on PostgreSQL, with `tokio-postgres`.
//!
//! Only calls the functions of `sql/rota-log-v1.sql` (compiled in), with the very
//! statements the npm package's `PgLogStore` sends. One connection for queries
//! (pipelined; made again when it drops) and one per subscription for LISTEN.
//! Plain TCP or a unix socket only (no TLS yet).

use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Mutex};
use tokio::time::MissedTickBehavior;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Row};

use super::log::{
    Appended, Head, InstanceSeen, LeaderLease, LogEntry, LogError, LogResult, LogStore, Snapshot,
    SubscribeOptions, Subscription, Wake,
};

/// The schema both hosts apply.
pub const SCHEMA_SQL: &str = include_str!("../../../sql/rota-log-v1.sql");
/// The schema version this host speaks (the row [`SCHEMA_SQL`] writes).
pub const SCHEMA_VERSION: i32 = 1;

// Serializes concurrent first applications across instances (any fixed key: 'rota').
const APPLY_LOCK: i64 = 0x726f_7461;

// The notification channel of rota_append; payload "<last seq> <roster>".
const CHANNEL: &str = "rota_log";

/// The log of one roster in a PostgreSQL database.
pub struct PgLogStore {
    config: Config,
    roster: String,
    client: Mutex<Option<Arc<Client>>>,
}

impl PgLogStore {
    /// Connects to `url` (`postgres://user@host:port/db` or key=value pairs), applies
    /// the schema when the database has none yet, and returns `roster`'s store.
    pub async fn connect(url: &str, roster: &str) -> LogResult<Self> {
        let config = Config::from_str(url)
            .map_err(|e| LogError::InvalidInput(format!("bad connection string: {e}")))?;
        if roster.is_empty() {
            return Err(LogError::InvalidInput("the roster name is empty".into()));
        }
        let (mut client, connection) = config.connect(NoTls).await.map_err(db)?;
        let driver = tokio::spawn(connection);
        if let Err(e) = apply_schema(&mut client).await {
            driver.abort();
            return Err(e);
        }
        Ok(PgLogStore {
            config,
            roster: roster.to_owned(),
            client: Mutex::new(Some(Arc::new(client))),
        })
    }

    /// The query connection, made again when the last one was lost.
    async fn client(&self) -> LogResult<Arc<Client>> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(client));
        }
        *slot = None;
        let (client, connection) = self.config.connect(NoTls).await.map_err(db)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "rota log store: connection lost");
            }
        });
        let client = Arc::new(client);
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    async fn query(&self, statement: &str, params: &[&(dyn ToSql + Sync)]) -> LogResult<Vec<Row>> {
        let client = self.client().await?;
        client.query(statement, params).await.map_err(db)
    }

    async fn query_one(&self, statement: &str, params: &[&(dyn ToSql + Sync)]) -> LogResult<Row> {
        self.query(statement, params)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| LogError::Database(format!("no row from `{statement}`").into()))
    }

    /// The one value a function answers (`SELECT rota_x(...)`).
    async fn value<T: for<'a> FromSql<'a>>(
        &self,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> LogResult<T> {
        self.query_one(statement, params)
            .await?
            .try_get(0)
            .map_err(db)
    }
}

/// In one transaction, under an advisory lock, only when no version is there yet; a
/// newer version is refused, never downgraded (the same steps as npm/src/shared/schema.js).
async fn apply_schema(client: &mut Client) -> LogResult<()> {
    let tx = client.transaction().await.map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&APPLY_LOCK])
        .await
        .map_err(db)?;
    let present: bool = tx
        .query_one(
            "SELECT to_regclass('rota_schema') IS NOT NULL AS present",
            &[],
        )
        .await
        .map_err(db)?
        .get(0);
    let mut found = 0;
    if present {
        found = tx
            .query_one(
                "SELECT coalesce(max(version), 0)::int AS version FROM rota_schema",
                &[],
            )
            .await
            .map_err(db)?
            .get(0);
    }
    if found > SCHEMA_VERSION {
        return Err(LogError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found < SCHEMA_VERSION {
        tx.batch_execute(SCHEMA_SQL).await.map_err(db)?;
    }
    tx.commit().await.map_err(db)
}

/// The schema's SQLSTATEs (class RT) as their errors; anything else is `Database`.
fn db(error: tokio_postgres::Error) -> LogError {
    let message = error
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default();
    match error.code().map(|c| c.code()) {
        Some("RT001") => LogError::StaleEpoch(message),
        Some("RT002") => LogError::Compacted(message),
        Some("RT003") => LogError::NoSnapshot(message),
        _ => LogError::Database(Box::new(error)),
    }
}

// int8 columns: never negative here.
fn unsigned(value: i64) -> LogResult<u64> {
    u64::try_from(value).map_err(|_| {
        LogError::Database(format!("a negative number from the database: {value}").into())
    })
}

fn positive(name: &str, value: u64) -> LogResult<i64> {
    if value == 0 {
        return Err(LogError::InvalidInput(format!("{name} must be positive")));
    }
    i64::try_from(value)
        .map_err(|_| LogError::InvalidInput(format!("{name} is too large: {value}")))
}

fn non_empty(name: &str, value: &str) -> LogResult<()> {
    if value.is_empty() {
        return Err(LogError::InvalidInput(format!("{name} must not be empty")));
    }
    Ok(())
}

fn entry_row(row: &Row) -> LogResult<LogEntry> {
    Ok(LogEntry {
        seq: unsigned(row.get("seq"))?,
        now: unsigned(row.get("now_ms"))?,
        instance: row.get("instance"),
        epoch: row
            .get::<_, Option<i64>>("epoch")
            .map(unsigned)
            .transpose()?,
        entry: row.get("entry"),
    })
}

impl LogStore for PgLogStore {
    fn roster(&self) -> &str {
        &self.roster
    }

    async fn append(
        &self,
        entries: &[String],
        instance: &str,
        epoch: Option<u64>,
    ) -> LogResult<Appended> {
        if entries.is_empty() {
            return Err(LogError::InvalidInput(
                "append takes a non-empty batch".into(),
            ));
        }
        non_empty("instance", instance)?;
        let epoch = epoch.map(|e| positive("epoch", e)).transpose()?;
        let row = self
            .query_one(
                "SELECT * FROM rota_append($1, $2, $3, $4)",
                &[&self.roster, &instance, &epoch, &entries],
            )
            .await?;
        Ok(Appended {
            first_seq: unsigned(row.get("first_seq"))?,
            last_seq: unsigned(row.get("last_seq"))?,
            now: unsigned(row.get("now_ms"))?,
        })
    }

    async fn read_from(&self, seq: u64, limit: u32) -> LogResult<Vec<LogEntry>> {
        let seq = positive("seq", seq)?;
        if limit == 0 {
            return Err(LogError::InvalidInput("limit must be positive".into()));
        }
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        self.query(
            "SELECT * FROM rota_read($1, $2, $3)",
            &[&self.roster, &seq, &limit],
        )
        .await?
        .iter()
        .map(entry_row)
        .collect()
    }

    async fn head(&self) -> LogResult<Head> {
        let sql = "SELECT * FROM rota_head($1)";
        let row = self.query_one(sql, &[&self.roster]).await?;
        Ok(Head {
            last_seq: unsigned(row.get("last_seq"))?,
            last_now: unsigned(row.get("last_now"))?,
            compacted_through: unsigned(row.get("compacted_through"))?,
        })
    }

    async fn now(&self) -> LogResult<u64> {
        unsigned(self.value("SELECT rota_db_now()", &[]).await?)
    }

    async fn subscribe(&self, options: SubscribeOptions) -> LogResult<Subscription> {
        if options.poll.is_zero() {
            return Err(LogError::InvalidInput(
                "the poll interval must be positive".into(),
            ));
        }
        // Wakes coalesce: when the channel is full, one is pending anyway.
        let (tx, rx) = mpsc::channel(16);
        let listener = Arc::new(AtomicU32::new(0));
        let mut tasks = Vec::new();

        let poll_tx = tx.clone();
        tasks.push(
            tokio::spawn(async move {
                let mut timer = tokio::time::interval(options.poll);
                timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
                timer.tick().await; // the first tick is immediate
                loop {
                    timer.tick().await;
                    if let Err(mpsc::error::TrySendError::Closed(_)) = poll_tx.try_send(Wake::Poll)
                    {
                        return;
                    }
                }
            })
            .abort_handle(),
        );
        if options.listen {
            let config = self.config.clone();
            let roster = self.roster.clone();
            let pid = Arc::clone(&listener);
            tasks.push(tokio::spawn(listen(config, roster, options, tx, pid)).abort_handle());
        }
        Ok(Subscription::from_parts(rx, listener, tasks))
    }

    async fn heartbeat(&self, instance: &str) -> LogResult<u64> {
        non_empty("instance", instance)?;
        let sql = "SELECT rota_heartbeat($1, $2)";
        unsigned(self.value(sql, &[&self.roster, &instance]).await?)
    }

    async fn expired_instances(&self, ttl_ms: u64) -> LogResult<Vec<InstanceSeen>> {
        let ttl = positive("ttl_ms", ttl_ms)?;
        self.query(
            "SELECT * FROM rota_expired_instances($1, $2)",
            &[&self.roster, &ttl],
        )
        .await?
        .iter()
        .map(|row| {
            Ok(InstanceSeen {
                instance: row.get("instance"),
                last_seen: unsigned(row.get("last_seen"))?,
            })
        })
        .collect()
    }

    async fn expire_instance(
        &self,
        instance: &str,
        ttl_ms: u64,
        leader: &str,
        epoch: u64,
        entry: &str,
    ) -> LogResult<Option<u64>> {
        non_empty("instance", instance)?;
        non_empty("leader", leader)?;
        non_empty("entry", entry)?;
        let ttl = positive("ttl_ms", ttl_ms)?;
        let epoch = positive("epoch", epoch)?;
        let row = self
            .query_one(
                "SELECT * FROM rota_expire_instance($1, $2, $3, $4, $5, $6)",
                &[&self.roster, &instance, &ttl, &leader, &epoch, &entry],
            )
            .await?;
        if !row.get::<_, bool>("expired") {
            return Ok(None);
        }
        let seq = row.get::<_, Option<i64>>("seq").ok_or_else(|| {
            LogError::Database("rota_expire_instance expired an instance without a seq".into())
        })?;
        unsigned(seq).map(Some)
    }

    async fn forget_instance(&self, instance: &str) -> LogResult<bool> {
        non_empty("instance", instance)?;
        let sql = "SELECT rota_forget_instance($1, $2)";
        self.value(sql, &[&self.roster, &instance]).await
    }

    async fn acquire_leader(&self, instance: &str, ttl_ms: u64) -> LogResult<LeaderLease> {
        non_empty("instance", instance)?;
        let ttl = positive("ttl_ms", ttl_ms)?;
        let row = self
            .query_one(
                "SELECT * FROM rota_acquire_leader($1, $2, $3)",
                &[&self.roster, &instance, &ttl],
            )
            .await?;
        Ok(LeaderLease {
            acquired: row.get::<_, Option<bool>>("acquired").unwrap_or(false),
            instance: row.get("instance"),
            epoch: unsigned(row.get("epoch"))?,
            expires_at: unsigned(row.get("expires_at"))?,
        })
    }

    async fn renew_leader(&self, instance: &str, epoch: u64, ttl_ms: u64) -> LogResult<u64> {
        non_empty("instance", instance)?;
        let epoch = positive("epoch", epoch)?;
        let ttl = positive("ttl_ms", ttl_ms)?;
        let sql = "SELECT rota_renew_leader($1, $2, $3, $4)";
        unsigned(
            self.value(sql, &[&self.roster, &instance, &epoch, &ttl])
                .await?,
        )
    }

    async fn step_down(&self, instance: &str, epoch: u64) -> LogResult<bool> {
        non_empty("instance", instance)?;
        let epoch = positive("epoch", epoch)?;
        let sql = "SELECT rota_step_down($1, $2, $3)";
        self.value(sql, &[&self.roster, &instance, &epoch]).await
    }

    async fn write_snapshot(&self, seq: u64, state: &str) -> LogResult<()> {
        let seq = positive("seq", seq)?;
        self.query(
            "SELECT rota_write_snapshot($1, $2, $3)",
            &[&self.roster, &seq, &state],
        )
        .await?;
        Ok(())
    }

    async fn latest_snapshot(&self) -> LogResult<Option<Snapshot>> {
        let rows = self
            .query("SELECT * FROM rota_latest_snapshot($1)", &[&self.roster])
            .await?;
        rows.first()
            .map(|row| {
                Ok(Snapshot {
                    seq: unsigned(row.get("seq"))?,
                    state: row.get("state"),
                    created_at: unsigned(row.get("created_at"))?,
                })
            })
            .transpose()
    }

    async fn compact(&self, through: u64) -> LogResult<u64> {
        let through = positive("through", through)?;
        let sql = "SELECT rota_compact($1, $2)";
        unsigned(self.value(sql, &[&self.roster, &through]).await?)
    }
}

/// The LISTEN connection of a subscription: forwards this roster's notifications,
/// sends [`Wake::Listen`] whenever LISTEN took, and connects again (after one poll
/// interval) whenever the connection is lost, until the subscription is dropped.
async fn listen(
    config: Config,
    roster: String,
    options: SubscribeOptions,
    tx: mpsc::Sender<Wake>,
    pid: Arc<AtomicU32>,
) {
    while !tx.is_closed() {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let driver = async {
                    while let Some(message) =
                        std::future::poll_fn(|cx| connection.poll_message(cx)).await
                    {
                        match message {
                            Ok(AsyncMessage::Notification(n)) if n.channel() == CHANNEL => {
                                if let Some((seq, r)) = n.payload().split_once(' ') {
                                    if r == roster {
                                        if let Ok(seq) = seq.parse() {
                                            let _ = tx.try_send(Wake::Notify { seq });
                                        }
                                    }
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!(error = %e, "rota log store: LISTEN connection lost");
                                return;
                            }
                        }
                    }
                };
                let session = async {
                    let setup = async {
                        client.batch_execute("LISTEN rota_log").await?;
                        let row = client
                            .query_one("SELECT pg_backend_pid() AS pid", &[])
                            .await?;
                        Ok::<i32, tokio_postgres::Error>(row.get("pid"))
                    };
                    match setup.await {
                        Ok(backend) => {
                            pid.store(u32::try_from(backend).unwrap_or(0), Ordering::Release);
                            let _ = tx.try_send(Wake::Listen);
                            std::future::pending::<()>().await;
                        }
                        Err(e) => tracing::debug!(error = %e, "rota log store: LISTEN failed"),
                    }
                };
                tokio::select! {
                    () = driver => {}
                    () = session => {}
                }
            }
            Err(e) => tracing::debug!(error = %e, "rota log store: cannot connect to LISTEN"),
        }
        pid.store(0, Ordering::Release);
        tokio::time::sleep(options.poll).await;
    }
}
