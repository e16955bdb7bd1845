<?php
// The php-fpm contender of scripts/bench-workloads.sh: the same work as work_plugin.cpp.
//   /cpu?n=N  /io?ms=M  /upload  /download?mb=M
function spin($n) {
    // The benchmark's integer loop (see work_plugin.cpp): stays below 2^62, so PHP keeps ints.
    $x = 1;
    for ($i = 0; $i < $n; $i++) $x = ($x * 1103515245 + 12345) & 0x7fffffff;
    return $x;
}
function arg($name, $fallback, $max) {
    $v = isset($_GET[$name]) ? (int)$_GET[$name] : $fallback;
    return max(0, min($v, $max));
}
header('Content-Type: text/plain');
switch (parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH)) {
case '/cpu':
    echo spin(arg('n', 0, 100000000)), "\n";
    break;
case '/io':
    usleep(arg('ms', 5, 10000) * 1000);
    echo "slept\n";
    break;
case '/upload':
    $in = fopen('php://input', 'rb');
    $total = 0;
    while (!feof($in)) $total += strlen(fread($in, 65536));
    echo $total, "\n";
    break;
case '/download':
    $mib = arg('mb', 10, 1024);
    header('Content-Length: ' . ($mib << 20));
    $chunk = str_repeat('d', 65536);
    for ($i = 0; $i < $mib * 16; $i++) echo $chunk;
    break;
default:
    echo 'OK';
}
