//! The CREATE and ALTER PUBLICATION statements the connector runs itself
//! (`--publication-autocreate-mode all_tables` and `filtered`), with the
//! privilege or server a refusal needs named.

use tokio_postgres::Client;

use super::{qualified, quote_ident, SetupError};

/// What `--publication-autocreate-mode all_tables` creates the publication
/// for: the `--table` list when given, else all tables.
pub(super) fn all_tables_target(tables: &[String]) -> String {
    if tables.is_empty() {
        return "ALL TABLES".to_owned();
    }
    let list: Vec<String> = tables
        .iter()
        .map(|t| match t.split_once('.') {
            Some((schema, table)) => qualified(schema, table),
            None => quote_ident(t),
        })
        .collect();
    format!("TABLE {}", list.join(", "))
}

/// Runs a CREATE/ALTER PUBLICATION, explaining a missing privilege.
pub(super) async fn run_publication_ddl(
    client: &Client,
    statement: &str,
    all_tables: bool,
) -> Result<(), SetupError> {
    client.batch_execute(statement).await.map_err(|error| {
        if error.code() == Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION) {
            SetupError::ReadOnlyServer {
                statement: format!("{statement};"),
                error,
            }
        } else if error.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
            SetupError::PublicationPrivilege {
                statement: format!("{statement};"),
                needs: if all_tables {
                    "a publication FOR ALL TABLES needs a superuser"
                } else {
                    "creating a publication needs CREATE on the database (GRANT CREATE ON DATABASE \
                     ... TO role), and publishing a table needs ownership of it (ALTER TABLE ... \
                     OWNER TO role) and of the publication, or a superuser"
                },
                error,
            }
        } else {
            SetupError::Query {
                action: statement.to_owned(),
                error,
            }
        }
    })
}
