// model/io/files: bounded reads of regular files only, JSON with a nesting limit, messages that
// escape what they echo, and writes that never leave half a file or follow a link.
#include "model/io/files.h"
#include "model/io/npy.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

std::string Dir(const std::string& name) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/files/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A path inside a folder, however either is spelt: a bare relative name not made yet is inside the
// current folder (`cd run && export --run . --out x` wrote into the run; ./x was refused).
TEST(Files, IsWithinReadsRelativeNamesFromTheCurrentFolder) {
    const std::filesystem::path here = std::filesystem::current_path();
    EXPECT_TRUE(model::IsWithin("not-made-yet", "."));
    EXPECT_TRUE(model::IsWithin("./not-made-yet", here.string()));
    EXPECT_TRUE(model::IsWithin((here / "a" / "b").string(), "."));
    EXPECT_FALSE(model::IsWithin("../elsewhere-not-made", "."));
    EXPECT_FALSE(model::IsWithin(".", "./not-made-yet"));
}

TEST(Files, ReadFileTakesRegularFilesUpToTheirLimit) {
    const std::string dir = Dir("read");
    std::ofstream(dir + "/ten.txt") << "0123456789";
    auto ten = model::ReadFile(dir + "/ten.txt", 10);
    ASSERT_TRUE(ten) << ten.error();
    EXPECT_EQ(*ten, "0123456789");
    auto over = model::ReadFile(dir + "/ten.txt", 9);
    ASSERT_FALSE(over);
    EXPECT_NE(over.error().find("is 10 bytes, more than the 9 bytes such a file may be"), std::string::npos) << over.error();

    auto dev = model::ReadFile("/dev/zero", 1 << 20);
    ASSERT_FALSE(dev);
    EXPECT_NE(dev.error().find("'/dev/zero' is a device, not a file"), std::string::npos) << dev.error();
    ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
    auto fifo = model::ReadFile(dir + "/fifo", 1 << 20);  // must not wait for a writer
    ASSERT_FALSE(fifo);
    EXPECT_NE(fifo.error().find("is a FIFO, not a file"), std::string::npos) << fifo.error();
    auto folder = model::ReadFile(dir, 1 << 20);
    ASSERT_FALSE(folder);
    EXPECT_NE(folder.error().find("is a folder, not a file"), std::string::npos) << folder.error();
    auto missing = model::ReadFile(dir + "/missing", 1 << 20);
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().find("does not exist"), std::string::npos) << missing.error();
    // A link to a regular file is read (the user may keep texts behind links).
    fs::create_symlink(dir + "/ten.txt", dir + "/link.txt");
    EXPECT_TRUE(model::ReadFile(dir + "/link.txt", 10));
    // A loop of links is said to be one, not that the file does not exist.
    fs::create_symlink(dir + "/loop_b", dir + "/loop_a");
    fs::create_symlink(dir + "/loop_a", dir + "/loop_b");
    auto loop = model::ReadFile(dir + "/loop_a", 10);
    ASSERT_FALSE(loop);
    EXPECT_NE(loop.error().find("loop_a' is a loop of symbolic links"), std::string::npos) << loop.error();
    auto under_a_file = model::ReadFile(dir + "/ten.txt/inside", 10);
    ASSERT_FALSE(under_a_file);
    EXPECT_NE(under_a_file.error().find("does not exist (a part of its path is a file)"), std::string::npos) << under_a_file.error();
}

TEST(Files, JsonNestingIsCappedAndNeverDumped) {
    const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
    auto parsed = model::ParseJsonText(deep);
    ASSERT_FALSE(parsed);
    EXPECT_NE(parsed.error().find("nested more than 64 levels deep"), std::string::npos) << parsed.error();
    const std::string ok = std::string(64, '[') + std::string(64, ']');
    EXPECT_TRUE(model::ParseJsonText(ok));
    EXPECT_FALSE(model::ParseJsonText(std::string(65, '[') + std::string(65, ']')));
    auto broken = model::ParseJsonText("{\"a\": ");
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().find('\n'), std::string::npos);

    // Keys given twice are named (dotted, the array's key for its items) when asked for, at most 20.
    std::vector<std::string> twice;
    auto dup = model::ParseJsonText(R"({"a": 1, "b": [{"c": 1, "c": 2}], "d": {"e": {"f": 0, "f": 1}}, "a": 2})", &twice);
    ASSERT_TRUE(dup) << dup.error();
    EXPECT_EQ((*dup)["a"], 2);
    EXPECT_EQ(twice, (std::vector<std::string>{"b.c", "d.e.f", "a"}));
    std::string many = "{";
    for (int k = 0; k < 50; ++k) many += "\"k\": 1, ";
    twice.clear();
    ASSERT_TRUE(model::ParseJsonText(many + "\"z\": 0}", &twice));
    EXPECT_EQ(twice.size(), 20u);
    // A duplicate's name is cut as it is built (each enclosing key of a megabyte was copied whole).
    const std::string long_key(1 << 20, 'k');
    twice.clear();
    ASSERT_TRUE(model::ParseJsonText("{\"" + long_key + "\": {\"" + long_key + "\": 1, \"" + long_key + "\": 2}}", &twice));
    ASSERT_EQ(twice.size(), 1u);
    EXPECT_LE(twice[0].size(), 123u);

    // Values in messages: described, not dumped; strings escaped and bounded.
    EXPECT_EQ(model::DescribeJson(nlohmann::json::parse("[[1], [2], [3]]")), "an array of 3");
    EXPECT_EQ(model::DescribeJson(nlohmann::json::parse(R"({"a": {"b": 1}})")), "an object of 1 keys");
    EXPECT_EQ(model::DescribeJson(nlohmann::json("x\ny")), "'x\\ny'");
    EXPECT_EQ(model::DescribeJson(nlohmann::json(2.5)), "2.5");
}

// A JSON text's tree is bounded by its size: two million empty objects (6 MB, 96 bytes each in the
// tree, about 200 MB; a 60 MB file of them held 2.3 GB and aborted where memory ran short) are
// refused, as many numbers (32 bytes each) are read, and a tokenizer's file may take twice as much.
TEST(Files, AJsonTreeIsBoundedByItsText) {
    std::string objects = "[", numbers = "[";
    for (int k = 0; k < 2000000; ++k) objects += k ? ",{}" : "{}", numbers += k ? ",0" : "0";
    objects += "]", numbers += "]";
    auto refused = model::ParseJsonText(objects);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("holding it would take more than 112.8 MB of memory"), std::string::npos) << refused.error();
    EXPECT_TRUE(model::ParseJsonText(numbers));
    EXPECT_TRUE(model::ParseJsonText(objects, nullptr, model::kTokenizerJsonTree));
}

TEST(Files, JsonTextEscapesEveryControlCharacter) {
    // nlohmann escapes U+0000..U+001F; DEL and the C1 controls U+0080..U+009F go out escaped too,
    // U+00A0 and later stay as they are, and a byte that is not UTF-8 is U+FFFD.
    const nlohmann::json j = {{"piece\x7f", std::string("a\x7f b\xc2\x80 c\xc2\x9b[2J d\xc2\xa0 e\xe2\x80\xa6 f\x01 g\xff")}};
    const std::string text = model::JsonText(j);
    EXPECT_EQ(text, "{\"piece\\u007f\":\"a\\u007f b\\u0080 c\\u009b[2J d\xc2\xa0 e\xe2\x80\xa6 f\\u0001 g\xef\xbf\xbd\"}");
    for (unsigned char c : text) EXPECT_TRUE(c >= 0x20 && c != 0x7F) << static_cast<int>(c);
    const auto back = model::ParseJsonText(text);
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ((*back)["piece\x7f"], std::string("a\x7f b\xc2\x80 c\xc2\x9b[2J d\xc2\xa0 e\xe2\x80\xa6 f\x01 g\xef\xbf\xbd"));
    EXPECT_EQ(model::JsonText(nlohmann::json::array({1, "plain", 2.5})), "[1,\"plain\",2.5]");
}

TEST(Files, EscapeForMessageKeepsOneSafeLine) {
    EXPECT_EQ(model::EscapeForMessage("wte.weight"), "wte.weight");
    EXPECT_EQ(model::EscapeForMessage("a\nb\tc\x1b[31mred"), "a\\nb\\tc\\x1b[31mred");
    EXPECT_EQ(model::EscapeForMessage("caf\xc3\xa9 \xe6\x97\xa5"), "caf\xc3\xa9 \xe6\x97\xa5");  // UTF-8 kept
    EXPECT_EQ(model::EscapeForMessage("bad \xff\xfe"), "bad \\xff\\xfe");
    EXPECT_EQ(model::EscapeForMessage("c1 \xc2\x9b"), "c1 \\u009b");  // a C1 control (CSI)
    // The bidirectional overrides and isolates (they reorder what follows): shown, not obeyed.
    EXPECT_EQ(model::EscapeForMessage("1/3 \xe2\x80\xae" "x \xe2\x81\xa6" "y \xe2\x80\xa6"), "1/3 \\u202ex \\u2066y \xe2\x80\xa6");
    EXPECT_EQ(model::EscapeForMessage(std::string(1000, 'x'), 10), std::string(10, 'x') + "...");
}

TEST(Files, AtomicWritesReplaceLinksAndLeaveNothingHalfDone) {
    const std::string dir = Dir("write");
    std::ofstream(dir + "/outside.txt") << "precious";
    fs::create_symlink(dir + "/outside.txt", dir + "/out.txt");
    ASSERT_TRUE(model::WriteFileAtomically(dir + "/out.txt", "new"));
    EXPECT_FALSE(fs::is_symlink(dir + "/out.txt"));
    EXPECT_EQ(Slurp(dir + "/out.txt"), "new");
    EXPECT_EQ(Slurp(dir + "/outside.txt"), "precious");
    // A folder, a FIFO or a device where the file goes is named and left as it is (a screenshot
    // at /dev/null replaced the node), with no temporary left behind.
    fs::create_directories(dir + "/taken");
    std::ofstream(dir + "/taken/keep") << "k";
    auto s = model::WriteFileAtomically(dir + "/taken", "x");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("taken' is a folder where ssaviz writes a file"), std::string::npos) << s.error();
    ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
    s = model::WriteFileAtomically(dir + "/fifo", "x");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("fifo' is a FIFO, not a file: ssaviz does not replace it"), std::string::npos) << s.error();
    EXPECT_TRUE(fs::is_fifo(dir + "/fifo"));
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename().string().rfind(".", 0) == 0;
    EXPECT_EQ(entries, 0u) << "a temporary file was left behind";
}

// Files that belong together (a screenshot and its description) are written all or none: one that
// cannot be written leaves every other as it was, and no temporary behind. CheckCanWriteFile asks
// the same before the work.
TEST(Files, FilesWrittenTogetherAreReplacedAllOrNone) {
    const std::string dir = Dir("write_together");
    std::ofstream(dir + "/shot.png") << "old picture";
    fs::create_directories(dir + "/shot.png.json");  // a folder where the description goes
    auto s = model::WriteFilesAtomically({{dir + "/shot.png", "new picture"}, {dir + "/shot.png.json", "{}"}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("shot.png.json' is a folder where ssaviz writes a file"), std::string::npos) << s.error();
    EXPECT_EQ(Slurp(dir + "/shot.png"), "old picture");
    auto check = model::CheckCanWriteFile(dir + "/shot.png.json");
    ASSERT_FALSE(check);
    EXPECT_NE(check.error().find("is a folder where ssaviz writes a file"), std::string::npos) << check.error();
    fs::remove(dir + "/shot.png.json");
    EXPECT_TRUE(model::CheckCanWriteFile(dir + "/shot.png.json"));
    EXPECT_FALSE(fs::exists(dir + "/shot.png.json")) << "the check makes nothing";
    ASSERT_TRUE(model::WriteFilesAtomically({{dir + "/shot.png", "new picture"}, {dir + "/shot.png.json", "{}"}}));
    EXPECT_EQ(Slurp(dir + "/shot.png"), "new picture");
    EXPECT_EQ(Slurp(dir + "/shot.png.json"), "{}");
    auto nowhere = model::CheckCanWriteFile(dir + "/no-such-folder/shot.png");
    ASSERT_FALSE(nowhere);
    EXPECT_NE(nowhere.error().find("cannot write (No such file or directory)"), std::string::npos) << nowhere.error();
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename().string().rfind(".", 0) == 0;
    EXPECT_EQ(entries, 0u) << "a temporary file was left behind";
}

// JSON text with a NUL byte is refused where the NUL is: the parser took it for the text's end, so
// a session or config cut at a NUL opened with its rest unread. A string holds one escaped.
TEST(Files, JsonTextWithANulByteIsRefused) {
    auto cut = model::ParseJsonText(std::string("{\"a\":1}\0{\"b\":", 13));
    ASSERT_FALSE(cut);
    EXPECT_NE(cut.error().find("a NUL byte at byte 7: not JSON text"), std::string::npos) << cut.error();
    EXPECT_FALSE(model::ParseJsonText(std::string("{\"a\":\0 1}", 9)));
    auto escaped = model::ParseJsonText("{\"a\":\"x\\u0000y\"}");
    ASSERT_TRUE(escaped) << escaped.error();
    EXPECT_EQ((*escaped)["a"].get<std::string>(), std::string("x\0y", 3));
}

// Files moved into place together, all or none: where a move fails part way (a place that cannot
// take a file: here a folder, which an exchange would have swapped in; or a file whose new version
// is gone), the moves before it are undone, the files they had replaced back in place (an export
// whose last file could not be replaced left the user's first files replaced, the rest not). The
// same with the file system's exchange and without it (a link, or a move aside).
TEST(Files, RenamesAllOrNoneUndoTheMovesBeforeAFailure) {
    for (const bool exchange : {true, false}) {
        const std::string dir = Dir(exchange ? "rename_all_or_none" : "rename_all_or_none_plain");
        std::ofstream(dir + "/a") << "old a";
        std::ofstream(dir + "/a.new") << "new a";
        std::ofstream(dir + "/b.new") << "new b";  // b: nothing there yet
        std::ofstream(dir + "/c") << "old c";
        fs::create_symlink("c", dir + "/link");
        std::ofstream(dir + "/link.new") << "new link";
        fs::create_directories(dir + "/folder/inside");
        std::ofstream(dir + "/folder.new") << "new folder";
        std::ofstream(dir + "/d.new") << "new d";
        const std::vector<std::pair<std::string, std::string>> before = {
            {dir + "/a.new", dir + "/a"}, {dir + "/b.new", dir + "/b"}, {dir + "/link.new", dir + "/link"}};
        for (const auto& [from, to, said] : {std::tuple<std::string, std::string, std::string>{"folder.new", "folder", "a folder is there"},
                                             {"d.new", "d", "a folder is there"},  // a move made, then the folder's fails
                                             {"gone", "c", "its new version is gone"}}) {
            auto moves = before;
            moves.emplace_back(dir + "/" + from, dir + "/" + to);
            if (to == "d") moves.emplace_back(dir + "/folder.new", dir + "/folder");
            auto s = model::RenameAllOrNone(moves, exchange);
            ASSERT_FALSE(s);
            EXPECT_NE(s.error().find(said), std::string::npos) << s.error();
            EXPECT_NE(s.error().find("nothing was replaced"), std::string::npos) << s.error();
            EXPECT_EQ(Slurp(dir + "/a"), "old a");
            EXPECT_EQ(Slurp(dir + "/a.new"), "new a");
            EXPECT_FALSE(fs::exists(dir + "/b"));
            EXPECT_EQ(Slurp(dir + "/b.new"), "new b");
            EXPECT_TRUE(fs::is_symlink(dir + "/link")) << "the link back, never written through";
            EXPECT_EQ(Slurp(dir + "/c"), "old c");
            EXPECT_EQ(Slurp(dir + "/link.new"), "new link");
            EXPECT_TRUE(fs::is_directory(dir + "/folder/inside")) << "the user's folder where it was";
            EXPECT_FALSE(fs::exists(dir + "/d"));
            EXPECT_EQ(Slurp(dir + "/d.new"), "new d");
        }
        ASSERT_TRUE(model::RenameAllOrNone(before, exchange));
        EXPECT_EQ(Slurp(dir + "/a"), "new a");
        EXPECT_EQ(Slurp(dir + "/b"), "new b");
        EXPECT_FALSE(fs::is_symlink(dir + "/link"));
        EXPECT_EQ(Slurp(dir + "/link"), "new link");
        EXPECT_EQ(Slurp(dir + "/c"), "old c") << "replaced the link, not what it pointed to";
        std::vector<std::string> left;
        for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
        std::sort(left.begin(), left.end());
        EXPECT_EQ(left, (std::vector<std::string>{"a", "b", "c", "d.new", "folder", "folder.new", "link"})) << "the replaced files removed";
    }
}

// Folders (train's model folders and checkpoints) go in place the same way, and a folder the
// caller cannot prove it wrote is never replaced, nor a link written through.
TEST(Files, FoldersReplaceOnlyWhatTheirOwnerAccepts) {
    const std::string dir = Dir("folders"), dest = dir + "/model";
    auto ours = [](const std::string& d) { return fs::exists(d + "/mine") ? model::Status(model::Ok{}) : model::Fail(d + ": not ours"); };
    auto fill = [&](const std::string& content) {
        auto temp = model::CreateTempFolderBeside(dest);
        EXPECT_TRUE(temp) << temp.error();
        EXPECT_EQ(fs::path(*temp).parent_path(), fs::path(dir));
        std::ofstream(*temp + "/mine") << content;
        return *temp;
    };
    // Absent: the folder is renamed in. Ours: replaced, the old one gone, nothing left beside it.
    ASSERT_TRUE(model::ReplaceFolder(fill("one"), dest, ours));
    EXPECT_EQ(Slurp(dest + "/mine"), "one");
    ASSERT_TRUE(model::ReplaceFolder(fill("two"), dest, ours));
    EXPECT_EQ(Slurp(dest + "/mine"), "two");
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"model"});
    // Not ours, a link, a file: refused, untouched, the temporary left for the caller.
    fs::remove(dest + "/mine");
    std::ofstream(dest + "/theirs") << "keep";
    std::string temp = fill("three");
    auto s = model::ReplaceFolder(temp, dest, ours);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("not ours"), std::string::npos) << s.error();
    EXPECT_EQ(Slurp(dest + "/theirs"), "keep");
    EXPECT_TRUE(fs::exists(temp + "/mine"));
    fs::remove_all(dest);
    fs::create_directories(dir + "/elsewhere");
    fs::create_symlink(dir + "/elsewhere", dest);
    s = model::ReplaceFolder(temp, dest, ours);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("is a symbolic link"), std::string::npos) << s.error();
    EXPECT_TRUE(fs::is_empty(dir + "/elsewhere"));
    EXPECT_FALSE(model::CheckReplaceableFolder(dest, ours));
    fs::remove(dest);
    std::ofstream(dest) << "a file";
    s = model::CheckReplaceableFolder(dest, ours);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("is a file where ssaviz writes a folder"), std::string::npos) << s.error();
    fs::remove_all(temp);
}

// The folders an export writes below --out, checked before long work: a link or a file on the way
// refused, and the deepest folder there writable (a read-only run/ under the window's --export-to
// was found once the whole timeline had run), and a folder to be replaced that can be emptied.
// Asked as an unprivileged user: root writes anywhere.
TEST(Files, FoldersBelowAreCheckedForLinksAndWriting) {
    char made[] = "/tmp/ssaviz-below-XXXXXX";  // /tmp: every user can pass through it
    ASSERT_NE(::mkdtemp(made), nullptr);
    const std::string dir = made;
    fs::create_directories(dir + "/open/run"), fs::create_directories(dir + "/shut/run"), fs::create_directories(dir + "/elsewhere");
    fs::create_directory_symlink(dir + "/elsewhere", dir + "/linked");
    ::chmod(dir.c_str(), 0755), ::chmod((dir + "/open").c_str(), 0777), ::chmod((dir + "/open/run").c_str(), 0777);
    ::chmod((dir + "/shut").c_str(), 0777), ::chmod((dir + "/shut/run").c_str(), 0555);
    // A folder to be replaced whose inner folder cannot be emptied (another user's): refused before
    // anything moves (train swapped it out and left it behind, hidden, exit 0).
    fs::create_directories(dir + "/open/old/inner"), std::ofstream(dir + "/open/old/inner/file") << "x";
    ::chmod((dir + "/open/old").c_str(), 0777), ::chmod((dir + "/open/old/inner").c_str(), 0555);
    // In a sticky folder another user's folder cannot be moved, whatever access() says (it passed).
    fs::create_directories(dir + "/sticky/old"), fs::create_directories(dir + "/sticky/mine");
    std::ofstream(dir + "/sticky/theirs.png") << "x";
    ::chmod((dir + "/sticky").c_str(), 01777), ::chmod((dir + "/sticky/old").c_str(), 0777), ::chmod((dir + "/sticky/mine").c_str(), 0777);
    if (::geteuid() == 0) {
        ASSERT_EQ(::chown((dir + "/sticky/mine").c_str(), 65534, 65534), 0);
    }
    auto any = [](const std::string&) { return model::Status(model::Ok{}); };
    // The cases in a child that is not root: it exits with the first that fails (0: none).
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        const bool was_root = ::geteuid() == 0;  // else every folder here is this user's: no other user's to refuse
        if (was_root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(100);
        const auto s = model::CheckFoldersBelow(dir + "/shut", dir + "/shut/run");
        const auto inner = model::CheckReplaceableFolder(dir + "/open/old", any);
        const auto sticky = model::CheckReplaceableFolder(dir + "/sticky/old", any);
        const bool cases[] = {
            bool(model::CheckFoldersBelow(dir + "/open", dir + "/open/run/curves")),  // 1: made in a writable run/
            bool(model::CheckFoldersBelow(dir + "/open", dir + "/open/run")),
            !s && s.error().find("cannot write in it") != std::string::npos,
            !model::CheckFoldersBelow(dir + "/shut", dir + "/shut/run/curves"),  // 4: would be made in it
            !model::CheckFoldersBelow(dir, dir + "/linked/run"),
            !inner && inner.error().find("/inner' in it cannot be emptied") != std::string::npos,
            bool(model::CheckReplaceableFolder(dir + "/open/run", any)),
            !was_root || (!sticky && sticky.error().find("another user's, in a sticky folder") != std::string::npos),  // 8
            bool(model::CheckReplaceableFolder(dir + "/sticky/mine", any)),
            !was_root || !model::CheckFilePlace(dir + "/sticky/theirs.png"),  // 10: a file export would replace
            bool(model::CheckFilePlace(dir + "/sticky/new.png")),
        };
        for (size_t k = 0; k < std::size(cases); ++k)
            if (!cases[k]) ::_exit(static_cast<int>(k) + 1);
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the case that failed, from 1; 100: could not leave root";
    ::chmod((dir + "/shut/run").c_str(), 0755), ::chmod((dir + "/open/old/inner").c_str(), 0755);
    fs::remove_all(dir);
}

// A killed export's staging folder is removed by the next one there; one a process holds (its
// flock), a fresh one, a link or a file of that name, and another name's, never.
TEST(Files, AnAbandonedTempFolderIsRemovedAndAHeldOneKept) {
    const std::string dir = Dir("abandoned"), path = dir + "/export";
    auto made = model::HeldTempFolder::Create(path);
    ASSERT_TRUE(made) << made.error();
    std::optional<model::HeldTempFolder> held(std::move(*made));
    EXPECT_EQ(fs::path(held->path()).parent_path(), fs::path(dir));
    EXPECT_TRUE(model::AbandonedTempFolders(path, 0).empty()) << "held: its maker is writing it";
    fs::create_directory(dir + "/.export.ssaviz-killed");
    std::ofstream(dir + "/.export.ssaviz-killed/0.tmp") << "half a file";
    fs::create_directory(dir + "/.other.ssaviz-killed");
    fs::create_directory_symlink(dir + "/.other.ssaviz-killed", dir + "/.export.ssaviz-link");
    std::ofstream(dir + "/.export.ssaviz-file") << "not a folder";
    // Names mkdtemp never makes (its six letters and digits): a user's folders, kept.
    for (const char* users : {"/.export.ssaviz-userdata", "/.export.ssaviz-ab_cd1", "/.export.ssaviz-abc"}) fs::create_directory(dir + users);
    EXPECT_EQ(model::AbandonedTempFolders(path, 0), std::vector<std::string>{dir + "/.export.ssaviz-killed"});
    EXPECT_TRUE(model::AbandonedTempFolders(path, 3600).empty()) << "made just now: perhaps not locked yet";
    {
        auto second = model::HeldTempFolder::Create(path, 0);
        ASSERT_TRUE(second) << second.error();
        EXPECT_FALSE(fs::exists(dir + "/.export.ssaviz-killed"));
        EXPECT_TRUE(fs::exists(held->path())) << "another writer's, held";
        for (const char* kept : {"/.other.ssaviz-killed", "/.export.ssaviz-file", "/.export.ssaviz-userdata", "/.export.ssaviz-ab_cd1", "/.export.ssaviz-abc"})
            EXPECT_TRUE(fs::exists(dir + kept)) << kept;
        EXPECT_TRUE(fs::is_symlink(dir + "/.export.ssaviz-link"));
    }
    // Let go (its maker killed: the kernel drops the lock): abandoned.
    const std::string first = held->path();
    held.reset();
    EXPECT_EQ(model::AbandonedTempFolders(path, 0).size(), 2u) << "the first and the second, both let go";
    EXPECT_TRUE(fs::exists(first));
}

// A temporary file a killed writer left (its PID no process now) is removed by the next write of
// that file; one of a live process (this one, pid 1), a fresh one, another name's, a folder or a
// link of that name, never.
TEST(Files, AnAbandonedTempFileIsRemovedByTheNextWrite) {
    const std::string dir = Dir("abandoned_files"), path = dir + "/model.safetensors";
    const pid_t child = fork();
    if (child == 0) _exit(0);
    ASSERT_GT(child, 0);
    waitpid(child, nullptr, 0);  // a PID that was a process and is none now
    const std::string dead = dir + "/.model.safetensors.ssaviz-" + std::to_string(child) + "-3.tmp";
    std::ofstream(dead) << "half a tensor";
    const std::string mine = dir + "/.model.safetensors.ssaviz-" + std::to_string(getpid()) + "-999.tmp";
    std::ofstream(mine) << "being written";
    std::ofstream(dir + "/.model.safetensors.ssaviz-1-0.tmp") << "init's";
    std::ofstream(dir + "/.other.ssaviz-" + std::to_string(child) + "-0.tmp") << "another file's";
    std::ofstream(dir + "/.model.safetensors.ssaviz-" + std::to_string(child) + "-x.tmp") << "not our name";
    fs::create_directory(dir + "/.model.safetensors.ssaviz-" + std::to_string(child) + "-1.tmp");
    fs::create_symlink(dead, dir + "/.model.safetensors.ssaviz-" + std::to_string(child) + "-2.tmp");
    EXPECT_EQ(model::AbandonedTempFiles(path, 0), std::vector<std::string>{dead});
    EXPECT_TRUE(model::AbandonedTempFiles(path, 3600).empty()) << "made just now";
    ASSERT_TRUE(model::WriteFileAtomically(path, "whole"));
    EXPECT_EQ(Slurp(path), "whole");
    size_t kept = 0;  // the write's own temporary is gone; the dead one, under a minute old, stays (a writer's before its first byte)
    for (const auto& e : fs::directory_iterator(dir)) kept += e.path().filename() != "model.safetensors";
    EXPECT_EQ(kept, 7u);
}

// A zero-length array is a valid .npy: a header with shape (0,) and no data (a one-token text has
// no losses), whatever pointer the empty array gives.
TEST(Files, ZeroLengthArraysAreWritten) {
    const std::string dir = Dir("npy");
    const std::vector<float> none;
    ASSERT_TRUE(model::WriteNpy(dir + "/empty.npy", none.data(), {0}));
    const std::string bytes = Slurp(dir + "/empty.npy");
    EXPECT_EQ(bytes.size() % 64, 0u);
    EXPECT_NE(bytes.find("'shape': (0,)"), std::string::npos) << bytes;
}

}  // namespace
