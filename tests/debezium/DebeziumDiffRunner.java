import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.HeaderConverter;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Debezium's side of pgcdc-kafka's differential test (tests/debezium_diff.rs).
 *
 * <p>Runs the Debezium PostgreSQL connector in the embedded engine with the
 * Connect format, so each change arrives as the SourceRecord a Kafka Connect
 * worker would see, and turns every record into bytes the way a worker's
 * WorkerSourceTask does: the SMTs, then the header converter for each header,
 * then the key and value converters. One engine run feeds several "outputs"
 * (converter and transform configurations), each written to
 * {@code <out-dir>/<output>.jsonl}, one JSON object per record:
 * {@code {"topic", "key", "value", "headers": [{"name", "value"}]}} with the
 * bytes in base64 (null for a null key, value or header).
 *
 * <p>Usage: {@code DebeziumDiffRunner <runner.properties> <out-dir>}. The
 * properties: {@code engine.*} go to the engine without the prefix;
 * {@code stop.topic} and {@code stop.prefix} name the logical decoding
 * message that ends the run (it is written too); {@code timeout.seconds}
 * bounds the run; {@code outputs} lists the output names and
 * {@code output.<name>.*} configures each: {@code key.converter},
 * {@code value.converter}, {@code header.converter} (class names, their
 * settings under the same prefix, e.g. {@code key.converter.schemas.enable}),
 * {@code topics} (a regex: only records of matching topics) and
 * {@code transforms} (Kafka Connect's syntax).
 */
public final class DebeziumDiffRunner {

    /** One converter and transform configuration, and the file it writes. */
    private static final class Output {
        final String name;
        final Pattern topics;
        final List<Transformation<SourceRecord>> transforms = new ArrayList<>();
        final Converter key;
        final Converter value;
        final HeaderConverter header;
        final BufferedWriter out;
        long written;

        Output(String name, Map<String, String> conf, Path dir) throws Exception {
            this.name = name;
            this.topics = Pattern.compile(conf.getOrDefault("topics", ".*"));
            this.key = (Converter) instance(required(conf, "key.converter"));
            this.key.configure(under(conf, "key.converter."), true);
            this.value = (Converter) instance(required(conf, "value.converter"));
            this.value.configure(under(conf, "value.converter."), false);
            this.header = (HeaderConverter) instance(required(conf, "header.converter"));
            // As a Connect worker does: JsonConverter asks which part it writes.
            Map<String, String> hconf = under(conf, "header.converter.");
            hconf.putIfAbsent("converter.type", "header");
            this.header.configure(hconf);
            String chain = conf.getOrDefault("transforms", "").trim();
            if (!chain.isEmpty()) {
                for (String alias : chain.split("\\s*,\\s*")) {
                    Map<String, String> tconf = under(conf, "transforms." + alias + ".");
                    @SuppressWarnings("unchecked")
                    Transformation<SourceRecord> t =
                            (Transformation<SourceRecord>) instance(required(tconf, "type"));
                    t.configure(tconf);
                    transforms.add(t);
                }
            }
            this.out = Files.newBufferedWriter(dir.resolve(name + ".jsonl"), StandardCharsets.UTF_8);
        }

        /** What a Kafka Connect worker would produce for {@code record}. */
        void write(SourceRecord record) throws IOException {
            if (!topics.matcher(record.topic()).matches()) {
                return;
            }
            // Each output gets its own headers: an SMT may change them in
            // place (ExtractNewRecordState's add.headers does), and Debezium's
            // tombstone shares its delete's headers.
            SourceRecord r = record.newRecord(record.topic(), record.kafkaPartition(),
                    record.keySchema(), record.key(), record.valueSchema(), record.value(),
                    record.timestamp(), record.headers().duplicate());
            for (Transformation<SourceRecord> t : transforms) {
                r = t.apply(r);
                if (r == null) {
                    return; // filtered out by the SMT
                }
            }
            StringBuilder line = new StringBuilder(256);
            line.append("{\"topic\":").append(quote(r.topic()));
            StringBuilder headers = new StringBuilder("[");
            org.apache.kafka.common.header.internals.RecordHeaders raw =
                    new org.apache.kafka.common.header.internals.RecordHeaders();
            for (Header h : r.headers()) {
                byte[] bytes = header.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value());
                raw.add(h.key(), bytes);
                if (headers.length() > 1) {
                    headers.append(',');
                }
                headers.append("{\"name\":").append(quote(h.key()))
                        .append(",\"value\":").append(b64(bytes)).append('}');
            }
            headers.append(']');
            byte[] k = key.fromConnectData(r.topic(), raw, r.keySchema(), r.key());
            byte[] v = value.fromConnectData(r.topic(), raw, r.valueSchema(), r.value());
            line.append(",\"key\":").append(b64(k))
                    .append(",\"value\":").append(b64(v))
                    .append(",\"headers\":").append(headers)
                    .append("}\n");
            out.write(line.toString());
            written++;
        }
    }

    private static Object instance(String className) throws Exception {
        return Class.forName(className).getDeclaredConstructor().newInstance();
    }

    private static String required(Map<String, String> conf, String key) {
        String v = conf.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing setting " + key);
        }
        return v;
    }

    /** The settings under {@code prefix}, with the prefix removed. */
    private static Map<String, String> under(Map<String, String> conf, String prefix) {
        Map<String, String> sub = new HashMap<>();
        conf.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                sub.put(k.substring(prefix.length()), v);
            }
        });
        return sub;
    }

    private static String b64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** Whether {@code record} is the logical decoding message that ends the run. */
    private static boolean isStop(SourceRecord record, String topic, String prefix) {
        if (!record.topic().equals(topic) || !(record.value() instanceof Struct)) {
            return false;
        }
        Struct value = (Struct) record.value();
        if (value.schema().field("message") == null) {
            return false;
        }
        Struct message = value.getStruct("message");
        return message != null && prefix.equals(message.getString("prefix"));
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: DebeziumDiffRunner <runner.properties> <out-dir>");
            System.exit(2);
        }
        Properties file = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            file.load(in);
        }
        Map<String, String> conf = new LinkedHashMap<>();
        file.stringPropertyNames().forEach(k -> conf.put(k, file.getProperty(k)));
        System.err.println("debezium-diff-runner: java " + System.getProperty("java.version"));
        Path dir = Path.of(args[1]);
        Files.createDirectories(dir);

        Properties engine = new Properties();
        engine.putAll(under(conf, "engine."));
        String stopTopic = required(conf, "stop.topic");
        String stopPrefix = required(conf, "stop.prefix");
        long timeout = Long.parseLong(conf.getOrDefault("timeout.seconds", "120"));
        List<Output> outputs = new ArrayList<>();
        for (String name : required(conf, "outputs").split("\\s*,\\s*")) {
            outputs.add(new Output(name, under(conf, "output." + name + "."), dir));
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Throwable[] failure = new Throwable[1];
        long[] seen = new long[1];
        boolean[] stopSeen = new boolean[1];
        DebeziumEngine<RecordChangeEvent<SourceRecord>> dbz = DebeziumEngine
                .create(ChangeEventFormat.of(Connect.class))
                .using(engine)
                .notifying((List<RecordChangeEvent<SourceRecord>> batch,
                            DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer) -> {
                    for (RecordChangeEvent<SourceRecord> event : batch) {
                        SourceRecord record = event.record();
                        seen[0]++;
                        try {
                            for (Output o : outputs) {
                                o.write(record);
                            }
                        } catch (IOException | RuntimeException e) {
                            failure[0] = e;
                            stopped.countDown();
                            return;
                        }
                        committer.markProcessed(event);
                        if (isStop(record, stopTopic, stopPrefix)) {
                            stopSeen[0] = true;
                            stopped.countDown();
                        }
                    }
                    committer.markBatchFinished();
                })
                .using((boolean success, String message, Throwable error) -> {
                    if (!success && failure[0] == null) {
                        failure[0] = error != null ? error : new IllegalStateException(message);
                    }
                    stopped.countDown();
                })
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(dbz);
        stopped.await(timeout, TimeUnit.SECONDS);
        dbz.close();
        executor.shutdown();
        executor.awaitTermination(30, TimeUnit.SECONDS);
        for (Output o : outputs) {
            o.out.close();
            System.err.println("debezium-diff-runner: output " + o.name + ": " + o.written + " records");
        }
        if (failure[0] != null) {
            System.err.println("debezium-diff-runner: failed after " + seen[0] + " records");
            failure[0].printStackTrace();
            System.exit(1);
        }
        if (!stopSeen[0]) {
            System.err.println("debezium-diff-runner: no stop message (" + stopTopic + ", prefix "
                    + stopPrefix + ") within " + timeout + " s; saw " + seen[0] + " records");
            System.exit(1);
        }
        System.err.println("debezium-diff-runner: done, " + seen[0] + " records");
        System.exit(0);
    }
}
