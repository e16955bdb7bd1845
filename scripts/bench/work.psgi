# The Plack contender of scripts/bench-workloads.sh: the same work as work_plugin.cpp.
#   /cpu?n=N  /io?ms=M  /upload  /download?mb=M
use strict;
use warnings;
use Plack::Util;
use Time::HiRes ();

# The benchmark's integer loop (see work_plugin.cpp): stays below 2^62, so Perl keeps integers.
sub spin {
    my ($n) = @_;
    my $x = 1;
    for (my $i = 0; $i < $n; $i++) { $x = ($x * 1103515245 + 12345) & 0x7fffffff; }
    return $x;
}

sub arg {
    my ($query, $name, $fallback, $max) = @_;
    my $v = ($query // '') =~ /(?:^|&)\Q$name\E=(\d+)/ ? $1 : $fallback;
    return $v > $max ? $max : $v;
}

my $text = ['Content-Type' => 'text/plain'];

sub {
    my ($env) = @_;
    my ($path, $query) = split /\?/, $env->{REQUEST_URI} // '/', 2;
    if ($path eq '/cpu') {
        return [200, $text, [spin(arg($query, 'n', 0, 100_000_000)) . "\n"]];
    }
    if ($path eq '/io') {
        Time::HiRes::sleep(arg($query, 'ms', 5, 10_000) / 1000);
        return [200, $text, ["slept\n"]];
    }
    if ($path eq '/upload') {
        my ($total, $buf) = (0, '');
        while (my $n = $env->{'psgi.input'}->read($buf, 65536)) { $total += $n; }
        return [200, $text, ["$total\n"]];
    }
    if ($path eq '/download') {
        my $mib = arg($query, 'mb', 10, 1024);
        my $chunk = 'd' x 65536;
        my $left = $mib * 16;
        my $body = Plack::Util::inline_object(
            getline => sub { return $left-- > 0 ? $chunk : undef },
            close   => sub { });
        return [200, ['Content-Type' => 'text/plain', 'Content-Length' => $mib << 20], $body];
    }
    return [200, $text, ['OK']];
};
