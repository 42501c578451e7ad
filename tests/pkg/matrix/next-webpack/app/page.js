// A server component rendering the client one: `next build` prerenders this
// page, so the client component (and edgeleaf, imported at its top) runs on
// the server too.
import Ids from './ids.js';

export default function Page() {
  return <Ids />;
}
