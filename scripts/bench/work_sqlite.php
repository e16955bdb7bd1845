<?php
// The php-fpm contender of the sqlite scenario of scripts/bench-workloads.sh: one indexed lookup
// by a random key per request, as sqlite_plugin.cpp and work_sqlite.c do. A persistent PDO
// connection: each child opens its own once and keeps it (php-fpm's connection per process).
//   /sqlite   SELECT name, value FROM items WHERE k = ?  (k random in 1..BENCH_SQLITE_ROWS)
header('Content-Type: text/plain');
if (parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) !== '/sqlite') {
    echo 'OK';
    return;
}
$db = new PDO('sqlite:' . getenv('BENCH_SQLITE_DB'), null, null, [
    PDO::ATTR_PERSISTENT => true,
    PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
]);
$lookup = $db->prepare('SELECT name, value FROM items WHERE k = ?');
$lookup->execute([random_int(1, (int)getenv('BENCH_SQLITE_ROWS'))]);
$row = $lookup->fetch(PDO::FETCH_NUM);
if ($row === false) {
    http_response_code(404);
    echo "no row\n";
} else {
    echo $row[0], ' ', $row[1], "\n";
}
