// Debian's Chromium, headless, for the browser tests (playwright-core drives it;
// nothing is downloaded). As root it needs --no-sandbox; the rest keeps it
// off the network this machine does not have.
import { chromium } from 'playwright-core';

export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-sync',
      '--disable-background-networking', '--disable-component-update'],
  });
}
