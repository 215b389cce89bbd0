#!/usr/bin/env bash
# Start PostgreSQL, MariaDB, Redis, RabbitMQ and NATS (JetStream) when they are down, and wait
# until each accepts connections. Safe to run when they are already up.
set -uo pipefail

up() { # name, check command
  local name=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then echo "services: $name is up"; return 0; fi
    sleep 1
  done
  echo "services: $name did not come up" >&2
  return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! port_open 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
if ! port_open 3306; then
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || true
fi
if ! port_open 6379; then
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
if ! port_open 5672; then
  rabbitmq-server -detached || true
fi
if ! port_open 4222; then
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || true
fi

status=0
up postgresql port_open 5432 || status=1
up mariadb port_open 3306 || status=1
up redis port_open 6379 || status=1
up rabbitmq port_open 5672 || status=1
up nats port_open 4222 || status=1
exit $status
