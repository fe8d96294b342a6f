// The desktop's file chooser (platform/portal.h) against a stand-in xdg-desktop-portal on a private D-Bus
// session bus (CTest runs this under dbus-run-session): the probe, libportal's OpenFile / SaveFile calls and
// their Response signal, a cancel, and a bus with no portal on it. Without a session bus the tests skip.
#include "fake_portal.h"
#include "platform/portal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace {

using attnscope_test::FakePortal;

// The chooser's answer (a bound of 60 s, not a timing: the stand-in answers at once).
std::optional<app::ChooserResult> waitForResult(app::DesktopChooser& c)
{
    for (int i = 0; i < 12000; ++i) {
        if (auto r = c.take()) return r;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
}

// Runs one dialog of `kind` through a fresh chooser.
std::optional<app::ChooserResult> choose(app::ChooserKind kind, const std::string& title, const std::string& name,
                                         bool* availableAfter = nullptr)
{
    app::DesktopChooser chooser;
    EXPECT_TRUE(chooser.mayBeAvailable());
    if (!chooser.start(kind, title, name)) return std::nullopt;
    auto r = waitForResult(chooser);
    if (availableAfter) *availableAfter = chooser.mayBeAvailable();
    return r;
}

#define REQUIRE_BUS()                                                                                        \
    if (app::sessionBusAddress().empty()) GTEST_SKIP() << "no D-Bus session bus (CTest runs this under dbus-run-session)"

TEST(Portal, NoPortalOnTheBusIsReportedUnavailable)
{
    REQUIRE_BUS();
    bool after = true;
    auto r = choose(app::ChooserKind::Open, "Open session", "", &after);
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->unavailable);
    EXPECT_NE(r->message.find("no xdg-desktop-portal file chooser answered"), std::string::npos) << r->message;
    EXPECT_FALSE(after);
}

TEST(Portal, OpenFileReturnsTheChosenPath)
{
    REQUIRE_BUS();
    FakePortal portal("file:///tmp/some%20folder/chosen.json");
    ASSERT_TRUE(portal.owned());
    bool after = false;
    auto r = choose(app::ChooserKind::Open, "Open session", "", &after);
    ASSERT_TRUE(r.has_value());
    EXPECT_FALSE(r->unavailable) << r->message;
    EXPECT_EQ(r->path, "/tmp/some folder/chosen.json");  // the URI decoded to a local path
    EXPECT_EQ(portal.lastMethod(), "OpenFile");
    EXPECT_EQ(portal.lastTitle(), "Open session");
    EXPECT_TRUE(after);
}

TEST(Portal, SaveFileSuggestsTheNameAndReturnsThePath)
{
    REQUIRE_BUS();
    FakePortal portal("file:///tmp/out.json");
    ASSERT_TRUE(portal.owned());
    auto r = choose(app::ChooserKind::Save, "Save session as", "mine.json");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->path, "/tmp/out.json") << r->message;
    EXPECT_EQ(portal.lastMethod(), "SaveFile");
    EXPECT_EQ(portal.lastName(), "mine.json");
}

TEST(Portal, CancelGivesNoPathAndNoError)
{
    REQUIRE_BUS();
    FakePortal portal("", 1);
    ASSERT_TRUE(portal.owned());
    bool after = false;
    auto r = choose(app::ChooserKind::Open, "Open session", "", &after);
    ASSERT_TRUE(r.has_value());
    EXPECT_FALSE(r->unavailable);
    EXPECT_TRUE(r->path.empty());
    EXPECT_TRUE(r->message.empty()) << r->message;  // the user chose not to: nothing to report
    EXPECT_TRUE(after);  // a cancel is not "no portal"
}

TEST(Portal, ClosingTheWindowWhileTheDialogIsOpenCancelsIt)
{
    REQUIRE_BUS();
    FakePortal portal("", FakePortal::kNeverAnswer);
    ASSERT_TRUE(portal.owned());
    {
        app::DesktopChooser chooser;
        ASSERT_TRUE(chooser.start(app::ChooserKind::Open, "Open session", ""));
        for (int i = 0; i < 12000 && portal.lastMethod().empty(); ++i)  // the dialog is up (a bound, not a timing)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ASSERT_EQ(portal.lastMethod(), "OpenFile");
        EXPECT_TRUE(chooser.busy());
        EXPECT_FALSE(chooser.start(app::ChooserKind::Open, "Open session", ""));  // one dialog at a time
    }  // the destructor cancels the request and joins the worker: a hang here fails the test by its timeout
}

} // namespace
