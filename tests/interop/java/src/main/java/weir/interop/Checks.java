package weir.interop;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.Objects;
import java.util.concurrent.ExecutionException;

/**
 * Runs named checks and prints one line per check, as the other interop scripts do:
 *
 * <pre>
 * PASS: name
 * FAIL: name: reason
 * NOTE: text (not a failure)
 * </pre>
 *
 * <p>A check fails on a {@link CheckFailed} (a mismatch) or on any exception the client throws.
 * The whole run has a deadline: past it a FAIL line is printed and the JVM halts with status 2.
 */
final class Checks {
  /** A mismatch found by a check; its message is the reason printed. */
  static final class CheckFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CheckFailed(String message) {
      super(message);
    }
  }

  /** A check's body. */
  interface Body {
    void run() throws Exception;
  }

  private final String script;
  private final long started = System.nanoTime();
  private volatile String current;
  private int passed;
  private int failed;

  Checks(String script, int deadlineSeconds) {
    this.script = script;
    Thread watchdog =
        new Thread(
            () -> {
              try {
                Thread.sleep(deadlineSeconds * 1000L);
              } catch (InterruptedException e) {
                return;
              }
              String name = current != null ? current : script;
              System.out.printf(
                  "FAIL: %s: timed out (%s exceeded its %d s budget)%n", name, script, deadlineSeconds);
              System.out.flush();
              Runtime.getRuntime().halt(2);
            },
            "deadline");
    watchdog.setDaemon(true);
    watchdog.start();
  }

  /** Runs one check; returns whether it passed. */
  boolean run(String name, Body body) {
    current = name;
    try {
      body.run();
    } catch (CheckFailed e) {
      fail(name, e.getMessage());
      return false;
    } catch (Exception e) {
      Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
      fail(name, cause.getClass().getName() + ": " + cause.getMessage());
      StringWriter trace = new StringWriter();
      cause.printStackTrace(new PrintWriter(trace));
      trace.toString().lines().limit(12).forEach(l -> System.out.println("    | " + l));
      return false;
    } finally {
      current = null;
    }
    pass(name);
    return true;
  }

  void pass(String name) {
    passed++;
    System.out.println("PASS: " + name);
    System.out.flush();
  }

  void fail(String name, String reason) {
    failed++;
    System.out.println("FAIL: " + name + ": " + reason);
    System.out.flush();
  }

  static void note(String text) {
    System.out.println("NOTE: " + text);
    System.out.flush();
  }

  /** Prints the totals and exits: 1 if any check failed. */
  void finish() {
    double took = (System.nanoTime() - started) / 1e9;
    System.out.printf("%s: %d checks passed, %d failed in %.1f s%n", script, passed, failed, took);
    System.out.flush();
    // halt: client threads left behind by a failed check cannot hold the JVM up.
    Runtime.getRuntime().halt(failed > 0 ? 1 : 0);
  }

  static void expect(boolean condition, String message) {
    if (!condition) {
      throw new CheckFailed(message);
    }
  }

  static void expectEq(Object actual, Object expected, String what) {
    if (!Objects.equals(actual, expected)) {
      throw new CheckFailed(what + ": expected " + expected + ", got " + actual);
    }
  }

  /** Runs body, which must throw an exception (or an ExecutionException caused by one) of type want. */
  static void expectThrows(Class<? extends Throwable> want, Body body, String what) {
    try {
      body.run();
    } catch (Exception e) {
      Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
      if (want.isInstance(cause)) {
        return;
      }
      throw new CheckFailed(
          what + ": expected " + want.getSimpleName() + ", got " + cause.getClass().getName() + ": " + cause.getMessage());
    }
    throw new CheckFailed(what + ": expected " + want.getSimpleName() + ", but it succeeded");
  }
}
