// rota/shared: the pieces of a roster shared by several processes through PostgreSQL
// (Node only). The log store is the database half; see README.md, "Shared roster log".

export { LOG_STORE_ERROR_CODES, LogStoreError, PgLogStore } from './pg-log-store.js'
export { SCHEMA_VERSION } from './schema.js'
