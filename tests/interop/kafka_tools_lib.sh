# Kafka's own tools for the interop scripts: sourced once `B` (a broker's
# HOST:PORT), `here`, `project` (tests/interop/java), `work`, `T` and the
# `pass`, `fail`, `show`, `note` and `finish` functions are defined.
#
# Fetches org.apache.kafka:kafka-tools and its dependencies with Maven (the
# kafka-tools profile of tests/interop/java/pom.xml; kept in
# tests/interop/java/target/kafka-tools) and defines `tool`, which runs one
# tool's main class with `java -cp`, as the kafka-*.sh scripts do, and
# `expect`, which checks what it printed.

version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$project/pom.xml")
lib=$project/target/kafka-tools
if [[ ! -f "$lib/kafka-tools-$version.jar" ]]; then
  rm -rf "$lib"
  if ! mvn -q -B -f "$project/pom.xml" -P kafka-tools dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$lib" >"$work/mvn.log" 2>&1; then
    fail "fetch org.apache.kafka:kafka-tools:$version" "mvn dependency:copy-dependencies failed"
    show <"$work/mvn.log"
    finish
  fi
fi
note "kafka-tools $version ($(ls "$lib" | wc -l) jars)"

# Short-lived tools: the client compiler only, a small serial heap; the
# clients' own log at WARN (slf4j-simple, which the profile adds).
JAVA_OPTS=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)
# Class data sharing: one run archives the classes it loaded and the others
# map that archive, which halves each tool's start-up. Without it (an
# archive the JVM cannot write) they start as usual.
if timeout "$T" java "${JAVA_OPTS[@]}" -XX:ArchiveClassesAtExit="$work/tools.jsa" -cp "$lib/*" \
  org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --list >/dev/null 2>&1 &&
  [[ -s "$work/tools.jsa" ]]; then
  JAVA_OPTS+=(-XX:SharedArchiveFile="$work/tools.jsa")
fi

# tool NAME CLASS ARGS...: runs one tool; its output (stdout and stderr) is
# left in $out; returns the tool's exit status.
tool() {
  out=$work/$1.out
  shift
  local class=$1
  shift
  timeout "$T" java "${JAVA_OPTS[@]}" -cp "$lib/*" "org.apache.kafka.tools.$class" "$@" >"$out" 2>&1
}

# expect NAME STATUS PATTERN...: passes if the tool exited 0 and each
# extended regular expression matches a line of its output.
expect() {
  local name=$1 status=$2 pattern
  shift 2
  if ((status != 0)); then
    fail "$name" "exited $status"
    show <"$out"
    return 1
  fi
  for pattern in "$@"; do
    if ! grep -Eq -- "$pattern" "$out"; then
      fail "$name" "no line matches /$pattern/"
      show <"$out"
      return 1
    fi
  done
  pass "$name"
}
