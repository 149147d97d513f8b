#!/usr/bin/env bash
# Installs the pinned Apache Kafka release the tests, benches and demo start
# (brokers/src/kafka/), unless it is already installed: Maven resolves
# org.apache.kafka:kafka_2.13 with its runtime dependencies (and log4j's
# SLF4J binding, so the brokers log) from Maven Central into a cache
# outside the repository. The VERSION file is written last: an install cut
# short is done again.
#
#   scripts/setup-kafka.sh
#
# Where: $WALFETCH_KAFKA_HOME, else ${XDG_CACHE_HOME:-~/.cache}/walfetch/kafka-<version>.
# Needs a JDK 17+ (`java`) and Maven (`mvn`); about 15 s and 45 MB cold.
set -euo pipefail

version=4.4.0
log4j=2.25.5
home="${WALFETCH_KAFKA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/walfetch/kafka-${version}}"

if [ "$(cat "${home}/VERSION" 2>/dev/null || true)" = "${version}" ]; then
    echo "setup-kafka: Apache Kafka ${version} already installed at ${home}"
    exit 0
fi

for tool in java mvn; do
    if ! command -v "${tool}" >/dev/null 2>&1; then
        echo "setup-kafka: ${tool} is not on PATH; Apache Kafka needs a JDK 17+ and Maven to install" >&2
        exit 1
    fi
done

echo "setup-kafka: installing Apache Kafka ${version} into ${home} (Maven Central)"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cat > "${work}/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>walfetch.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>${version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>${log4j}</version>
    </dependency>
  </dependencies>
</project>
POM
rm -rf "${home}"
mkdir -p "${home}"
mvn -q -B -f "${work}/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="${home}/libs"
echo "${version}" > "${home}/VERSION"
echo "setup-kafka: $(ls "${home}/libs" | wc -l) jars in ${home}/libs"
