import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.Map;

/**
 * A log dir's lock taken the way a Kafka broker takes it (org.apache.kafka.server.util.FileLock: open
 * DIR/.lock with CREATE, READ, WRITE, then FileChannel.tryLock()), driven line by line from stdin so one JVM
 * serves a whole test module:
 *
 *   lock DIR    -> "LOCKED <position> <size>" (the range the JDK locked) or "BUSY" (tryLock returned null)
 *   unlock DIR  -> "UNLOCKED" (release and close, as FileLock.unlockAndClose)
 *
 * Prints "READY <pid>" first. End of stdin closes every channel (dropping its lock) and exits.
 * Run as a single-file source program: java KafkaDirLock.java
 */
public class KafkaDirLock {
    public static void main(String[] args) throws Exception {
        Map<String, FileChannel> channels = new HashMap<>();
        Map<String, FileLock> locks = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            int space = line.indexOf(' ');
            String command = space < 0 ? line : line.substring(0, space);
            String dir = space < 0 ? "" : line.substring(space + 1);
            if (command.equals("lock")) {
                Path path = Paths.get(dir, ".lock");
                FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.READ,
                        StandardOpenOption.WRITE);
                FileLock lock;
                try {
                    lock = channel.tryLock();
                } catch (OverlappingFileLockException e) {  // held by this JVM: Kafka reads it as "not locked"
                    lock = null;
                }
                if (lock == null) {
                    channel.close();
                    System.out.println("BUSY");
                } else {
                    channels.put(dir, channel);
                    locks.put(dir, lock);
                    System.out.println("LOCKED " + lock.position() + " " + lock.size());
                }
            } else if (command.equals("unlock")) {
                FileLock lock = locks.remove(dir);
                FileChannel channel = channels.remove(dir);
                if (lock != null) {
                    lock.release();
                }
                if (channel != null) {
                    channel.close();
                }
                System.out.println("UNLOCKED");
            } else {
                System.out.println("ERROR unknown command " + command);
            }
            System.out.flush();
        }
        for (FileChannel channel : channels.values()) {
            channel.close();
        }
    }
}
