// Makes java_float_to_string.tsv, the table src/event/java_float.rs is tested against:
//   java tests/data/JavaFloats.java > tests/data/java_float_to_string.tsv   (JDK 19 or later; generated with Temurin 25.0.3)
// The duplicates the edge lists produce were removed (awk '!seen[$0]++').
import java.util.*;

/** Prints Float.toString / Double.toString of edge and random values, one per line:
 *  f32|f64 <tab> raw bits in hex <tab> Java's text. */
public class JavaFloats {
  static void f(float x) { System.out.println("f32\t" + String.format("%08x", Float.floatToRawIntBits(x)) + "\t" + Float.toString(x)); }
  static void d(double x) { System.out.println("f64\t" + String.format("%016x", Double.doubleToRawLongBits(x)) + "\t" + Double.toString(x)); }
  static void both(float x) { f(x); f(-x); f(Math.nextUp(x)); f(Math.nextDown(x)); }
  static void both(double x) { d(x); d(-x); d(Math.nextUp(x)); d(Math.nextDown(x)); }
  public static void main(String[] a) {
    float[] fe = {0f, Float.MIN_VALUE, Float.intBitsToFloat(0x007fffff), Float.MIN_NORMAL, Float.MAX_VALUE,
      1e7f, 9999999f, 1e-3f, 1e-4f, 100f, 1f, 0.1f, 0.2f, 0.3f, 1.1754944E-38f, 3.4028235e38f, 16777216f, 1.5f,
      123456.79f, 2e23f, 1e23f, 8.5e-45f, 9.999999e-4f, 9999999.5f, 1234567.9f, 33554432f, 0.0009765625f};
    for (float x : fe) both(x);
    f(-0f);
    for (int e = -45; e <= 38; e++) both(Float.parseFloat("1e" + e));
    for (int e = -45; e <= 38; e++) both(Float.parseFloat("2e" + e));
    for (int n = -149; n <= 127; n++) f((float) Math.scalb(1.0, n));
    double[] de = {0d, Double.MIN_VALUE, Double.longBitsToDouble(0x000fffffffffffffL), Double.MIN_NORMAL, Double.MAX_VALUE,
      1e7, 9999999.999999998, 1e-3, 1e-4, 100d, 1d, 0.1, 0.2, 0.3, 2e23, 1e23, 9.999999999999999e22, 5e-324, 1.7976931348623157e308,
      123456.789, 4.35, 2.0E-3, 1.0E21, 1.0E22, 5.0E-324, 9007199254740993d, 0.000999999999999999999, 1234567.0, 12345678.0, 3.141592653589793};
    for (double x : de) both(x);
    d(-0d);
    for (int e = -323; e <= 308; e++) both(Double.parseDouble("1e" + e));
    for (int e = -323; e <= 308; e += 3) both(Double.parseDouble("2e" + e));
    for (int n = -1074; n <= 1023; n += 7) d(Math.scalb(1.0, n));
    Random r = new Random(21);
    int nf = 0;
    while (nf < 3000) { float x = Float.intBitsToFloat(r.nextInt()); if (Float.isFinite(x)) { f(x); nf++; } }
    int nd = 0;
    while (nd < 3000) { double x = Double.longBitsToDouble(r.nextLong()); if (Double.isFinite(x)) { d(x); nd++; } }
    // values as databases hold them: short decimals
    for (int i = 0; i < 1000; i++) { double v = (r.nextInt(2000000) - 1000000) / Math.pow(10, r.nextInt(12)); d(v); f((float) v); }
  }
}
