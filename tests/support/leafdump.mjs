// Leaf's `leaf_alloc` table as `mysqldump` writes it (MySQL 8.0, default
// options: --extended-insert, --lock-tables, the /*!…*/ version comments),
// and as a CSV. Strings are escaped as mysqldump escapes them
// (mysql_real_escape_string: \0 \n \r \\ \' \" \Z).

/** One SQL string literal, escaped as mysqldump does. */
export function sqlString(s) {
  const map = { '\0': '\\0', '\n': '\\n', '\r': '\\r', '\\': '\\\\', "'": "\\'", '"': '\\"', '\x1a': '\\Z' };
  return `'${s.replace(/[\0\n\r\\'"\x1a]/g, (c) => map[c])}'`;
}

const value = (v) => (v === null ? 'NULL' : typeof v === 'string' ? sqlString(v) : String(v));

/**
 * A dump of `rows` (`{ bizTag, maxId, step, description }`): the header
 * comments, DROP/CREATE TABLE, LOCK TABLES, and INSERTs of `perInsert` rows
 * each (mysqldump splits them at --net-buffer-length). `completeInsert`:
 * with the column list (mysqldump --complete-insert).
 */
export function mysqldump(rows, { perInsert = 1000, completeInsert = false, table = 'leaf_alloc' } = {}) {
  const cols = completeInsert ? ' (`biz_tag`, `max_id`, `step`, `description`, `update_time`)' : '';
  const inserts = [];
  for (let i = 0; i < rows.length; i += perInsert) {
    const tuples = rows.slice(i, i + perInsert).map((r) =>
      `(${[r.bizTag, r.maxId, r.step, r.description ?? null, '2024-05-01 12:00:00'].map(value).join(',')})`);
    inserts.push(`INSERT INTO \`${table}\`${cols} VALUES ${tuples.join(',')};`);
  }
  return `-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)
--
-- Host: 127.0.0.1    Database: leaf
-- ------------------------------------------------------
-- Server version\t8.0.36

/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET @OLD_CHARACTER_SET_RESULTS=@@CHARACTER_SET_RESULTS */;
/*!40101 SET @OLD_COLLATION_CONNECTION=@@COLLATION_CONNECTION */;
/*!50503 SET NAMES utf8mb4 */;
/*!40103 SET @OLD_TIME_ZONE=@@TIME_ZONE */;
/*!40103 SET TIME_ZONE='+00:00' */;
/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;

--
-- Table structure for table \`${table}\`
--

DROP TABLE IF EXISTS \`${table}\`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!50503 SET character_set_client = utf8mb4 */;
CREATE TABLE \`${table}\` (
  \`biz_tag\` varchar(128) NOT NULL DEFAULT '',
  \`max_id\` bigint NOT NULL DEFAULT '1',
  \`step\` int NOT NULL,
  \`description\` varchar(256) DEFAULT NULL,
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb3;
/*!40101 SET character_set_client = @saved_cs_client */;

--
-- Dumping data for table \`${table}\`
--

LOCK TABLES \`${table}\` WRITE;
/*!40000 ALTER TABLE \`${table}\` DISABLE KEYS */;
${inserts.join('\n')}
/*!40000 ALTER TABLE \`${table}\` ENABLE KEYS */;
UNLOCK TABLES;
/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;

/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;
/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;
/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
/*!40101 SET CHARACTER_SET_RESULTS=@OLD_CHARACTER_SET_RESULTS */;
/*!40101 SET COLLATION_CONNECTION=@OLD_COLLATION_CONNECTION */;

-- Dump completed on 2024-05-01 12:00:00
`;
}

/** The same rows as CSV (RFC 4180: fields with , " or a line break quoted, "" for "). */
export function leafCsv(rows, { header = true } = {}) {
  const field = (v) => (v === null || v === undefined ? '' : /[",\r\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
  const lines = rows.map((r) => [r.bizTag, r.maxId, r.step, r.description].map(field).join(','));
  return `${header ? 'biz_tag,max_id,step,description\n' : ''}${lines.join('\n')}\n`;
}

/** Rows as a Leaf installation might hold them: a busy tag, Leaf's sample row, quoting in descriptions. */
export const LEAF_ROWS = [
  { bizTag: 'leaf-segment-test', maxId: 2001, step: 2000, description: 'Test leaf Segment Mode Get Id' },
  { bizTag: 'order', maxId: 987654321, step: 5000, description: 'orders: it\'s "quoted", a \\ backslash;\nand a line break' },
  { bizTag: 'user.v2', maxId: 1, step: 1000, description: null },
  { bizTag: 'pay:eu_1', maxId: 4503599627370000, step: 100000, description: 'near 2^52, tab\there, (parens), 中文' },
];
